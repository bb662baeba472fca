// The feed policy (remote/feed_policy.hpp): its rules one by one, and the shared trace that the
// Python policy (python/kpool/feed_policy.py) must decide identically.
#include "remote/feed_policy.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <fstream>
#include <utility>
#include <vector>

using kpool::remote::classify;
using kpool::remote::feed_policy;
using kpool::remote::verdict;

namespace {

// Sends `n` requests at once at `clock` and answers them `latency` ms later, `queued` of which
// each waited for a kernel: a round whose rate is n / latency.
void policy_round(feed_policy& p, double& clock, std::size_t n, double latency, double queued) {
    std::vector<std::uint64_t> tickets;
    for (std::size_t i = 0; i < n; ++i) {
        tickets.push_back(p.sent(clock, i + 1));
    }
    clock += latency / 1000;
    for (const auto t : tickets) {
        p.answered(clock, t, latency, queued);
    }
}

} // namespace

TEST_CASE("feed policy: only what never ran is sent again") {
    CHECK(classify(200, "", true) == verdict::answered);
    CHECK(classify(429, "overloaded", true) == verdict::retry);
    CHECK(classify(503, "unavailable", true) == verdict::retry);
    CHECK(classify(503, "stopped", true) == verdict::answered); // code a stop interrupted
    CHECK(classify(500, "internal", true) == verdict::answered);
    CHECK(classify(502, "kernel_died", true) == verdict::answered);
    CHECK(classify(504, "timeout", true) == verdict::answered);
    CHECK(classify(0, "", false) == verdict::retry); // no connection was made
    CHECK(classify(0, "", true) == verdict::lost);   // cut off after the request went out
    CHECK(classify(0, "", false, true) == verdict::hopeless);
    CHECK(classify(401, "unauthorized", true) == verdict::hopeless);
}

TEST_CASE(
    "feed policy: slow start doubles while nothing queues; a queue shrinks it to the tolerance") {
    feed_policy p({.max_in_flight = 64, .initial_window = 2});
    double clock = 0;
    CHECK(p.window() == 2);
    policy_round(p, clock, 3, 50, 0);
    CHECK(p.window() == 4);
    policy_round(p, clock, 4, 50, 0);
    CHECK(p.window() == 8);
    policy_round(p, clock, 8, 50, 30); // twice the rate, but most of each answer queued
    CHECK(p.window() == 5);            // 8 * 1.5 * 20 / 50 + 1
    policy_round(p, clock, 5, 50, 0);
    CHECK(p.window() == 6); // past slow start: +1
}

TEST_CASE("feed policy: a growth that buys no throughput is taken back, and left a while") {
    feed_policy p({.max_in_flight = 64, .initial_window = 4});
    double clock = 0;
    policy_round(p, clock, 4, 50, 0); // 80 a second
    CHECK(p.window() == 8);
    policy_round(p, clock, 8, 100, 0); // no queue, but each twice as slow: still 80 a second
    CHECK(p.window() == 4);
    for (int i = 0; i < 3; ++i) { // quiet rounds: no growth however well they go
        policy_round(p, clock, 4, 50, 0);
        CHECK(p.window() == 4);
    }
    policy_round(p, clock, 4, 50, 0);
    CHECK(p.window() == 5);           // past slow start now: one more
    policy_round(p, clock, 5, 50, 0); // 100 a second against 80: kept, and one more
    CHECK(p.window() == 6);
}

TEST_CASE("feed policy: an unused window does not grow") {
    feed_policy p({.initial_window = 4});
    for (int i = 0; i < 5; ++i) { // one request at a time: proves nothing about 4
        p.answered(i * 0.05 + 0.05, p.sent(i * 0.05, 1), 50, 0);
    }
    CHECK(p.window() == 4);
}

TEST_CASE("feed policy: answers to requests sent before a change do not count for the next") {
    feed_policy p({.initial_window = 8});
    double clock = 0;
    std::vector<std::uint64_t> old;
    for (std::size_t i = 0; i < 8; ++i) {
        old.push_back(p.sent(clock, i + 1));
    }
    clock += 0.2;
    for (std::size_t i = 0; i < 8; ++i) {
        p.answered(clock, old[i], 200, 150);
    }
    CHECK(p.window() == 5);              // 8 * 0.5 (the floor) + 1
    p.answered(clock, old[0], 400, 350); // a straggler of the old window: ignored
    policy_round(p, clock, 5, 50, 0);
    CHECK(p.window() == 6);
}

TEST_CASE("feed policy: a 429 cuts what was in flight and holds until an answer or Retry-After") {
    feed_policy p({.initial_window = 10});
    CHECK(p.may_send(0, 9));
    CHECK(p.refused(10, 10, 5) == doctest::Approx(15));
    CHECK(p.window() == 7);
    CHECK_FALSE(p.may_send(12, 0)); // held: the server said wait
    CHECK(p.may_send(15, 0));
    CHECK(p.refused(15, 7, 5) == doctest::Approx(20));
    CHECK(p.window() == 7); // once a round
    p.answered(16, p.sent(15.9, 1), 50, 0);
    CHECK(p.may_send(16, 0));                             // an answer came: there is room
    CHECK(p.refused(20, 3, -1) == doctest::Approx(20.1)); // no Retry-After: the backoff's
}

TEST_CASE("feed policy: refused connections back off from 0.1 s to 2 s, reset by an answer") {
    feed_policy p({.initial_window = 16});
    CHECK(p.unreachable(0) == doctest::Approx(0.1));
    CHECK(p.unreachable(1) == doctest::Approx(1.2));
    CHECK(p.window() == 4);
    for (int i = 0; i < 6; ++i) {
        p.unreachable(2);
    }
    CHECK(p.held_until() == doctest::Approx(4));
    CHECK(p.window() == 1);
    p.answered(5, p.sent(4.9, 1), 50, 0);
    CHECK(p.unreachable(6) == doctest::Approx(6.1));
}

// kpool serve with `kernels` warm kernels and jobs that each take `job_s` (beyond the kernels,
// requests queue for one), fed by `p` from a window of 1 after a cut; returns the answers
// it took the window to reach `kernels` (0: it never did within `jobs`).
std::size_t answers_to_regain(feed_policy& p, std::size_t kernels, double job_s, std::size_t jobs) {
    struct job {
        double done_at, sent_at, queued_s;
        std::uint64_t ticket;
    };
    std::vector<job> running;
    std::vector<std::pair<std::uint64_t, double>> waiting; // ticket, sent at
    double clock = 0;
    std::size_t in_flight = 0;
    for (std::size_t answered = 0; answered < jobs;) {
        while (p.may_send(clock, in_flight)) {
            const auto ticket = p.sent(clock, ++in_flight);
            if (running.size() < kernels) {
                running.push_back({clock + job_s, clock, 0, ticket});
            } else {
                waiting.emplace_back(ticket, clock);
            }
        }
        auto next =
            std::min_element(running.begin(), running.end(),
                             [](const job& a, const job& b) { return a.done_at < b.done_at; });
        const job j = *next;
        running.erase(next);
        clock = j.done_at;
        --in_flight;
        ++answered;
        p.answered(clock, j.ticket, (clock - j.sent_at) * 1000, j.queued_s * 1000);
        if (!waiting.empty()) {
            const auto [ticket, sent_at] = waiting.front();
            waiting.erase(waiting.begin());
            running.push_back({clock + job_s, sent_at, clock - sent_at, ticket});
        }
        if (p.window() >= kernels) {
            return answered;
        }
    }
    return 0;
}

TEST_CASE("feed policy: equal jobs regain the window after a cut in a few rounds") {
    // Counted over each round's own span of time, equal jobs' answers come in bursts and a
    // growth looked like no gain about one round in two: 110 answers to get back to 8.
    feed_policy p({.max_in_flight = 64, .initial_window = 2});
    p.refused(0, 1, 0); // a 429 with one in flight: window 1, past slow start
    REQUIRE(p.window() == 1);
    const std::size_t answers = answers_to_regain(p, 8, 1.5, 400);
    CHECK(answers > 0);
    CHECK(answers <= 50); // 1 + 2 + ... + 7 answers, one round each, and the rounds' stragglers
    // And past 20, where +1 is worth less than 5%: growth goes on (it stopped at 14 before).
    feed_policy wide({.max_in_flight = 64, .initial_window = 2});
    wide.refused(0, 1, 0);
    CHECK(answers_to_regain(wide, 24, 1.5, 600) > 0);
}

TEST_CASE("feed policy: the cap holds") {
    feed_policy p({.max_in_flight = 5, .initial_window = 4});
    double clock = 0;
    policy_round(p, clock, 4, 50, 0);
    CHECK(p.window() == 5);
    feed_policy one({.max_in_flight = 1, .initial_window = 4});
    CHECK(one.window() == 1);
}

TEST_CASE("feed policy: the shared trace decides as the Python policy does") {
    std::ifstream in(std::string(KPOOL_TEST_DATA) + "/feed_policy_trace.json");
    REQUIRE(in);
    const auto trace = nlohmann::json::parse(in);
    const auto& s = trace["settings"];
    feed_policy p({.max_in_flight = s["max_in_flight"].get<std::size_t>(),
                   .initial_window = s["initial_window"].get<std::size_t>(),
                   .tolerance = s["tolerance"].get<double>()});
    std::size_t n = 0;
    for (const auto& e : trace["events"]) {
        ++n;
        CAPTURE(n);
        const std::string op = e["op"];
        if (op == "sent") {
            CHECK(p.sent(e["now"], e["in_flight"]) == e["ticket"].get<std::uint64_t>());
        } else if (op == "answered") {
            p.answered(e["now"], e["ticket"], e["latency"], e["queued"]);
        } else if (op == "refused") {
            CHECK(p.refused(e["now"], e["in_flight"], e["retry_after"]) ==
                  doctest::Approx(e["returns"].get<double>()));
        } else {
            CHECK(p.unreachable(e["now"]) == doctest::Approx(e["returns"].get<double>()));
        }
        REQUIRE(p.window() == e["window"].get<std::size_t>());
        CHECK(p.held_until() == doctest::Approx(e["held_until"].get<double>()));
    }
    CHECK(n > 300);
}
