// autosizer and an auto-sized pool, with scripted arrivals on a hand-moved clock: steady load,
// a burst, and silence afterwards.
#include "daemon/core/autosize.hpp"
#include "daemon/core/pool.hpp"
#include "daemon/service/status_json.hpp"

#include <doctest/doctest.h>

using namespace kpool::daemon;
using namespace std::chrono_literals;

namespace {

using tp = autosizer::clock::time_point;
const tp t0 = tp{} + 1000s;

// Arrivals every `gap` from `start` for `duration`; returns the time after the last.
tp arrivals(autosizer& a, tp start, std::chrono::milliseconds gap, std::chrono::seconds duration) {
    tp t = start;
    for (; t < start + duration; t += gap) {
        a.on_acquire(t);
        a.update(t);
    }
    return t;
}

} // namespace

TEST_SUITE("autosize") {
    TEST_CASE("steady arrivals converge to rate x time to warm x safety") {
        autosizer a({.min = 1, .max = 20});
        a.on_time_to_warm(2.0);
        const tp end = arrivals(a, t0, 500ms, 300s); // 2 per second for 5 minutes
        CHECK(a.rate_per_s(end) == doctest::Approx(2.0).epsilon(0.05));
        CHECK(a.update(end) == 6); // ceil(2/s x 2 s x 1.5)
        CHECK(autosizer_status_json(a, end)["target"] == 6);
    }

    TEST_CASE("a burst grows the pool at once, up to max") {
        autosizer a({.min = 1, .max = 8});
        a.on_time_to_warm(1.0);
        CHECK(a.update(t0) == 1);
        tp t = t0;
        for (int i = 0; i < 30; ++i) { // 30 requests within 3 s
            t += 100ms;
            a.on_acquire(t);
        }
        CHECK(a.update(t) >= 5); // the fast rate sees about 5/s within three seconds
        for (int i = 0; i < 200; ++i) {
            t += 10ms;
            a.on_acquire(t);
        }
        CHECK(a.update(t) == 8); // capped at max
    }

    TEST_CASE("silence shrinks the pool, but only after a quiet period") {
        autosizer a({.min = 1, .max = 20, .shrink_after_s = 120});
        a.on_time_to_warm(2.0);
        tp t = arrivals(a, t0, 250ms, 120s); // 4/s
        const int busy = a.update(t);
        CHECK(busy == 12);
        t += 60s; // the rates have decayed, but the quiet period has just begun
        CHECK(a.update(t) == busy);
        REQUIRE(a.next_check(t).has_value());
        t += 130s;
        CHECK(a.update(t) == 1);                  // back to min
        CHECK_FALSE(a.next_check(t).has_value()); // at min: nothing left to watch
    }

    TEST_CASE("an acquire that finds the pool empty adds a kernel at once, up to max") {
        autosizer a({.min = 1, .max = 3});
        CHECK(a.update(t0) == 1);
        a.on_wait(t0);
        CHECK(a.target() == 2);
        CHECK(a.update(t0 + 1s) == 2); // kept, although the rates ask for less
        a.on_wait(t0 + 1s);
        a.on_wait(t0 + 1s);
        CHECK(a.target() == 3);
        CHECK(a.update(t0 + 30s) == 3);
        CHECK(a.update(t0 + 100s) == 1); // a quiet minute later
    }

    TEST_CASE("before any measurement, a start is taken to cost a second") {
        autosizer a({.min = 0, .max = 10});
        const tp end = arrivals(a, t0, 200ms, 200s); // 5/s
        CHECK(a.time_to_warm_s() < 0);
        CHECK(a.update(end) == 8); // ceil(5 x 1.0 x 1.5)
    }
}

namespace {

struct counting_driver final : kernel_driver {
    int started = 0;
    std::vector<std::string> stopped;
    kpool::status start_kernel(pool&, const std::string&, bool) override {
        ++started;
        return kpool::ok_status();
    }
    void stop_kernel(const std::string& id) override { stopped.push_back(id); }
    void watch_kernel(const std::string&, bool) override {}
    void hurry(const std::string&) override {}
    // Stopped kernels exit at the next step (report_exits), as the daemon would report them.
    std::size_t reported = 0;
    void report_exits(pool& p, clock::time_point now) {
        for (; reported < stopped.size(); ++reported) {
            p.on_exited(stopped[reported], "exit code 0", now);
        }
    }
};

// Grants are handed back at once, like clients that release right away.
struct releasing_sink final : waiter_sink {
    std::vector<std::string> granted_ids;
    bool granted(waiter_id, const kernel_entry& k) override {
        granted_ids.push_back(k.id);
        return true;
    }
    void failed(waiter_id, const kpool::error&) override {}
};

} // namespace

TEST_SUITE("autosize") {
    TEST_CASE("an auto-sized pool follows its arrivals and shows its reasoning in status") {
        counting_driver driver;
        releasing_sink sink;
        kernel_budget budget{64, 0};
        kpool::config::pool_config cfg;
        cfg.name = "auto";
        cfg.auto_size = true;
        cfg.min_size = 1;
        cfg.max_size = 10;
        cfg.size = 1;
        cfg.max_starting = 64;
        int next = 0;
        pool p(cfg, budget, driver, sink, [&next] { return "k" + std::to_string(++next); });
        clock::time_point now = clock::time_point{} + 1000s;
        p.refill(now);
        CHECK(driver.started == 1);
        // Kernels take 2 s to warm; arrivals at 2/s for a minute, each released at once.
        for (int i = 0; i < 120; ++i) {
            now += 500ms;
            for (auto& [id, k] : std::map<std::string, kernel_entry>(p.kernels())) {
                if (k.state == kernel_state::starting && now - k.created >= 2s) {
                    p.on_warm(id, {}, "/run/" + id + ".json", now);
                }
            }
            auto got = p.acquire(static_cast<waiter_id>(i + 1), 10s, std::nullopt, now);
            if (auto* k = std::get_if<const kernel_entry*>(&got)) {
                (void)p.release((*k)->id, now);
            }
            for (const auto& id : sink.granted_ids) {
                (void)p.release(id, now);
            }
            sink.granted_ids.clear();
            driver.report_exits(p, now);
            p.expire(now);
            p.refill(now);
        }
        const auto st = pool_status_json(p, now);
        CHECK(st["size"].get<int>() >= 4);
        CHECK(st["auto"]["target"] == st["size"]);
        CHECK(st["auto"]["time_to_warm_s"].get<double>() == doctest::Approx(2.0).epsilon(0.3));
        // Then silence: the pool shrinks back to min after the quiet period, stopping idle kernels.
        for (int i = 0; i < 100; ++i) {
            now += 5s;
            for (auto& [id, k] : std::map<std::string, kernel_entry>(p.kernels())) {
                if (k.state == kernel_state::starting) {
                    p.on_warm(id, {}, "/run/" + id + ".json", now);
                }
            }
            driver.report_exits(p, now);
            p.expire(now);
        }
        CHECK(p.config().size == 1);
        CHECK(p.count(kernel_state::warm) + p.count(kernel_state::starting) == 1);
        CHECK_FALSE(driver.stopped.empty());
        // A resize fixes the size: auto sizing is off until the next reload.
        p.resize(3, now);
        CHECK(pool_status_json(p, now)["auto"].is_null());
    }
}
