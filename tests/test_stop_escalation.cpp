// stop_escalation on a real libuv loop: the order of its steps, the extra grace a hurried
// teardown gets before SIGTERM, SIGTERM at once without a shutdown_request, and cancel. Each
// step records the loop's time (uv_now), which libuv advances once per turn: steps of one turn
// have the same time, and a step a grace later has a time at least a grace later. A kernel kept
// waiting for a CPU (a fake count here) gets more graces, up to a limit.
#include "daemon/process/stop_escalation.hpp"
#include "loop/uv_timer.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <csignal>
#include <cstdint>
#include <string>
#include <vector>

namespace {

using kpool::daemon::stop_escalation;
constexpr std::chrono::milliseconds stop_grace{30};
constexpr std::uint64_t grace_ms = 30;

struct stop_record {
    std::vector<std::string> steps;
    std::vector<std::uint64_t> at; // uv_now at each step, less uv_now at begin
};

// Runs one escalation to its end; `hurries` is what each call of the hurry step answers
// (with_hurry false: no hurry step); `cancel_after`, if set, cancels it that long after begin.
// `waited`, if set, is what each call of the cpu_waited step answers (ns; the last one from then
// on): a grace is starved when it grew by a quarter of a grace (7.5 ms here) or more.
stop_record escalate(bool ask_first, std::vector<bool> hurries, bool with_hurry,
                     std::chrono::milliseconds cancel_after = std::chrono::milliseconds{-1},
                     std::vector<unsigned long long> waited = {},
                     std::chrono::milliseconds limit = stop_escalation::starved_limit) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    stop_record r;
    {
        const std::uint64_t began = uv_now(&loop);
        auto note = [&](std::string step) {
            r.steps.push_back(std::move(step));
            r.at.push_back(uv_now(&loop) - began);
        };
        stop_escalation::steps s{
            [&] { note("ask"); },
            {},
            [&](int signum) {
                note(signum == SIGTERM ? "TERM" : signum == SIGKILL ? "KILL" : "?");
            },
            [&] { note("ignored"); },
            {},
            {}};
        if (with_hurry) {
            s.hurry = [&] {
                note("hurry");
                const bool hurried = !hurries.empty() && hurries.front();
                if (!hurries.empty()) {
                    hurries.erase(hurries.begin());
                }
                return hurried;
            };
        }
        if (!waited.empty()) {
            s.cpu_waited = [&waited] {
                const unsigned long long ns = waited.front();
                if (waited.size() > 1) {
                    waited.erase(waited.begin());
                }
                return ns;
            };
            s.starved = [&](double) { note("starved"); };
        }
        stop_escalation e(&loop, stop_grace, std::move(s), limit);
        kpool::loop::uv_timer canceller(&loop);
        if (cancel_after.count() >= 0) {
            canceller.start(cancel_after, [&] { e.cancel(); });
        }
        e.begin(ask_first);
        uv_run(&loop, UV_RUN_DEFAULT);
    }
    uv_run(&loop, UV_RUN_DEFAULT); // the timers' handles close
    CHECK(uv_loop_close(&loop) == 0);
    return r;
}

} // namespace

TEST_SUITE("stop_escalation") {
    TEST_CASE("ask, then SIGTERM and SIGKILL a grace apart") {
        auto r = escalate(true, {}, false);
        REQUIRE(r.steps == std::vector<std::string>{"ask", "TERM", "ignored", "KILL"});
        CHECK(r.at[0] == 0);
        CHECK(r.at[1] >= grace_ms);
        CHECK(r.at[2] - r.at[1] >= grace_ms);
        CHECK(r.at[3] == r.at[2]);
    }

    TEST_CASE("a teardown that was not at idle priority gets no second grace") {
        auto r = escalate(true, {false}, true);
        REQUIRE(r.steps == std::vector<std::string>{"ask", "hurry", "TERM", "ignored", "KILL"});
        CHECK(r.at[1] >= grace_ms);
        CHECK(r.at[2] == r.at[1]); // SIGTERM in the same turn as the hurry
        CHECK(r.at[3] - r.at[2] >= grace_ms);
    }

    TEST_CASE("a hurried teardown gets one more grace before SIGTERM, once") {
        auto r = escalate(true, {true, true}, true);
        REQUIRE(r.steps == std::vector<std::string>{"ask", "hurry", "TERM", "ignored", "KILL"});
        CHECK(r.at[1] >= grace_ms);
        CHECK(r.at[2] - r.at[1] >= grace_ms);
        CHECK(r.at[3] - r.at[2] >= grace_ms);
    }

    TEST_CASE("a kernel kept waiting for a CPU gets graces until it is not") {
        // At ask 0; starved through two graces (10 and 9 ms of waiting), then barely (1 ms).
        auto r = escalate(true, {false}, true, std::chrono::milliseconds{-1},
                          {0, 10'000'000, 19'000'000, 20'000'000});
        REQUIRE(r.steps == std::vector<std::string>{"ask", "hurry", "starved", "starved", "TERM",
                                                    "ignored", "KILL"});
        CHECK(r.at[2] >= grace_ms);
        CHECK(r.at[3] - r.at[2] >= grace_ms);
        CHECK(r.at[4] - r.at[3] >= grace_ms);
    }

    TEST_CASE("a hurried kernel's idle grace is not counted as starved: the count restarts at the "
              "hurry") {
        auto r = escalate(true, {true}, true, std::chrono::milliseconds{-1},
                          {0, 30'000'000, 31'000'000});
        REQUIRE(r.steps == std::vector<std::string>{"ask", "hurry", "TERM", "ignored", "KILL"});
        CHECK(r.at[2] - r.at[1] >= grace_ms);
    }

    TEST_CASE("a kernel starved on and on is stopped at the limit") {
        std::vector<unsigned long long> ever_more;
        for (unsigned long long i = 0; i < 100; ++i) {
            ever_more.push_back(i * 20'000'000);
        }
        auto r =
            escalate(true, {}, false, std::chrono::milliseconds{-1}, ever_more, 10 * stop_grace);
        REQUIRE(std::find(r.steps.begin(), r.steps.end(), "TERM") != r.steps.end());
        const auto graces = std::count(r.steps.begin(), r.steps.end(), "starved");
        CHECK(graces >= 1);
        CHECK(graces <= 9); // (limit - grace) / grace: never a grace past the limit
    }

    TEST_CASE("without known channels, SIGTERM at once and no hurry") {
        auto r = escalate(false, {true}, true);
        REQUIRE(r.steps == std::vector<std::string>{"TERM", "ignored", "KILL"});
        CHECK(r.at[0] == 0);
        CHECK(r.at[1] >= grace_ms);
    }

    TEST_CASE("cancelled (the process is gone), nothing more is sent") {
        auto r = escalate(true, {true}, true, stop_grace / 3);
        CHECK(r.steps == std::vector<std::string>{"ask"});
    }
}
