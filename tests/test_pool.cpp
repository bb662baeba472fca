// The pool state machine, driven deterministically: a fake driver and a hand-moved clock.
#include "daemon/core/pool.hpp"
#include "daemon/service/status_json.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <set>

using namespace kpool::daemon;
using namespace std::chrono_literals;
using kpool::errc;

namespace {

struct fake_driver final : kernel_driver {
    std::vector<std::string> started;
    std::vector<std::string> stopped;
    bool fail_next_start = false;
    std::vector<std::string> awaited_starts; // started while an acquire waited
    std::vector<std::string> hurried;
    void hurry(const std::string& id) override { hurried.push_back(id); }
    kpool::status start_kernel(pool&, const std::string& id, bool awaited) override {
        if (awaited) {
            awaited_starts.push_back(id);
        }
        if (fail_next_start) {
            fail_next_start = false;
            return kpool::error{fail_code, fail_code == errc::capacity
                                               ? "out of file descriptors"
                                               : "kernelspec 'x': not found"};
        }
        started.push_back(id);
        return kpool::ok_status();
    }
    void stop_kernel(const std::string& id) override { stopped.push_back(id); }
    std::set<std::string> watched; // kernels the daemon would watch with heartbeats
    void watch_kernel(const std::string& id, bool on) override {
        if (on) {
            watched.insert(id);
        } else {
            watched.erase(id);
        }
    }
    kpool::errc fail_code = errc::internal;
};

struct fake_sink final : waiter_sink {
    std::vector<std::pair<waiter_id, std::string>> grants;
    std::vector<std::pair<waiter_id, errc>> failures;
    bool reachable = true;
    bool granted(waiter_id w, const kernel_entry& k) override {
        if (!reachable) {
            return false;
        }
        grants.emplace_back(w, k.id);
        return true;
    }
    void failed(waiter_id w, const kpool::error& e) override { failures.emplace_back(w, e.code); }
};

struct fixture {
    fake_driver driver;
    fake_sink sink;
    kernel_budget budget{64, 0};
    int next_id = 0;
    clock::time_point now = clock::time_point{} + 1000s;
    std::unique_ptr<pool> p;

    explicit fixture(int size = 2, int max_starting = 2, int max_kernels = 64) {
        budget.max = max_kernels;
        kpool::config::pool_config cfg;
        cfg.name = "py";
        cfg.size = size;
        cfg.max_starting = max_starting;
        cfg.lease_s = 60;
        p = std::make_unique<pool>(cfg, budget, driver, sink,
                                   [this] { return "k" + std::to_string(++next_id); });
    }
    void warm(const std::string& id) {
        p->on_spawned(id, 100 + next_id);
        p->on_warm(id, {}, "/run/" + id + ".json", now);
    }
    void advance(clock::duration d) {
        now += d;
        p->expire(now);
    }
    const kernel_entry& kernel(const std::string& id) { return p->kernels().at(id); }
};

const kernel_entry* granted(const acquire_outcome& o) {
    auto* k = std::get_if<const kernel_entry*>(&o);
    return k != nullptr ? *k : nullptr;
}

} // namespace

TEST_SUITE("pool") {
    TEST_CASE("fills to size, at most max_starting at once") {
        fixture f(3, 2);
        f.p->refill(f.now);
        CHECK(f.driver.started == std::vector<std::string>{"k1", "k2"});
        CHECK(f.p->count(kernel_state::starting) == 2);
        f.warm("k1");
        CHECK(f.driver.started.size() == 3); // a slot freed up
        f.warm("k2");
        f.warm("k3");
        CHECK(f.p->count(kernel_state::warm) == 3);
        CHECK(f.driver.started.size() == 3);
    }

    TEST_CASE("acquire hands out the longest-warm kernel, once, and refill replaces it") {
        fixture f;
        f.p->refill(f.now);
        f.warm("k2");
        f.now += 1s;
        f.warm("k1");
        const kernel_entry* k = granted(f.p->acquire(1, 5s, std::nullopt, f.now));
        REQUIRE(k != nullptr);
        CHECK(k->id == "k2");
        CHECK(k->state == kernel_state::leased);
        CHECK(k->lease_deadline == f.now + 60s);
        CHECK(f.driver.started.size() == 2); // the caller refills after replying
        f.p->refill(f.now);
        CHECK(f.driver.started.size() == 3);
        const kernel_entry* k2 = granted(f.p->acquire(2, 5s, 10.0, f.now));
        REQUIRE(k2 != nullptr);
        CHECK(k2->id == "k1");
        CHECK(k2->lease_deadline == f.now + 10s);
        CHECK(f.p->counters().served_warm == 2);
    }

    TEST_CASE("with no warm kernel, acquires wait first come first served") {
        fixture f(1, 2);
        f.p->refill(f.now);
        CHECK(std::holds_alternative<acquire_queued>(f.p->acquire(1, 5s, std::nullopt, f.now)));
        CHECK(std::holds_alternative<acquire_queued>(f.p->acquire(2, 5s, std::nullopt, f.now)));
        CHECK(f.driver.started.size() == 2); // size 1 plus the extra waiter
        f.warm("k2");
        REQUIRE(f.sink.grants.size() == 1);
        CHECK(f.sink.grants[0] == std::pair<waiter_id, std::string>{1, "k2"});
        f.warm("k1");
        REQUIRE(f.sink.grants.size() == 2);
        CHECK(f.sink.grants[1].first == 2);
        CHECK(f.p->counters().waited == 2);
        CHECK(f.p->count(kernel_state::leased) == 2);
    }

    TEST_CASE("refill is background work until an acquire waits for it") {
        fixture f(1, 3);
        f.p->refill(f.now);
        CHECK(f.driver.started == std::vector<std::string>{"k1"});
        CHECK(f.driver.awaited_starts.empty()); // nobody waits: background priority
        f.warm("k1");
        REQUIRE(granted(f.p->acquire(1, 5s, std::nullopt, f.now)) != nullptr);
        f.p->refill(f.now); // as the daemon does once the reply is sent
        // k2 replaces k1 in the background; an acquire now waits for it and for k3.
        CHECK(f.driver.started == std::vector<std::string>{"k1", "k2"});
        CHECK(std::holds_alternative<acquire_queued>(f.p->acquire(2, 5s, std::nullopt, f.now)));
        CHECK(f.driver.hurried == std::vector<std::string>{"k2"});
        CHECK(f.driver.awaited_starts == std::vector<std::string>{"k3"});
        CHECK(f.kernel("k2").awaited);
        // A second waiter hurries nothing twice (k3 started at normal priority already).
        CHECK(std::holds_alternative<acquire_queued>(f.p->acquire(3, 5s, std::nullopt, f.now)));
        CHECK(f.driver.hurried == std::vector<std::string>{"k2"});
        CHECK(f.driver.awaited_starts == std::vector<std::string>{"k3", "k4"});
    }

    TEST_CASE("a waiter times out at its deadline; timeout 0 fails at once") {
        fixture f(1, 1);
        f.p->refill(f.now);
        auto o = f.p->acquire(1, 0ms, std::nullopt, f.now);
        REQUIRE(std::holds_alternative<kpool::error>(o));
        CHECK(std::get<kpool::error>(o).code == errc::timeout);
        CHECK(std::holds_alternative<acquire_queued>(f.p->acquire(2, 500ms, std::nullopt, f.now)));
        CHECK(f.p->next_deadline() == f.now + 500ms);
        f.advance(499ms);
        CHECK(f.sink.failures.empty());
        f.advance(1ms);
        REQUIRE(f.sink.failures.size() == 1);
        CHECK(f.sink.failures[0] == std::pair<waiter_id, errc>{2, errc::timeout});
        CHECK(f.p->counters().timed_out == 2);
        f.warm("k1");
        CHECK(f.sink.grants.empty()); // nobody is waiting any more
        CHECK(f.p->count(kernel_state::warm) == 1);
    }

    TEST_CASE("a warm kernel that dies is removed, counted, replaced and never handed out") {
        fixture f(1, 1);
        f.p->refill(f.now);
        f.warm("k1");
        f.p->on_exited("k1", "killed by signal 9", f.now);
        CHECK(f.p->kernels().count("k1") == 0);
        CHECK(f.p->counters().died_warm == 1);
        CHECK(f.driver.started == std::vector<std::string>{"k1", "k2"});
        CHECK(std::holds_alternative<acquire_queued>(f.p->acquire(1, 5s, std::nullopt, f.now)));
        CHECK(f.budget.used == 1);
    }

    TEST_CASE("start failures are counted and back off exponentially") {
        fixture f(1, 1);
        f.p->refill(f.now);
        f.p->on_start_failed("k1", "no kernel_info_reply within 60.0 s", f.now);
        CHECK(f.driver.stopped == std::vector<std::string>{"k1"});
        CHECK(f.p->counters().spawn_failures == 1);
        f.p->on_exited("k1", "killed by signal 15", f.now); // not counted twice
        CHECK(f.p->counters().spawn_failures == 1);
        CHECK(f.driver.started.size() == 1); // backing off
        CHECK(f.p->next_deadline() == f.now + 500ms);
        f.advance(500ms);
        CHECK(f.driver.started.size() == 2);
        CHECK_FALSE(f.p->next_deadline().has_value()); // the backoff is over, nothing is due
        f.p->on_exited("k2", "exit code 1", f.now);    // died while starting: failure #2
        CHECK(f.p->counters().spawn_failures == 2);
        CHECK(f.p->next_deadline() == f.now + 1000ms);
        CHECK(pool_status_json(*f.p, f.now)["consecutive_failures"] == 2);
        CHECK(pool_status_json(*f.p, f.now)["failing"] == false); // not yet: see the next case
        f.advance(1000ms);
        f.warm("k3");
        CHECK(pool_status_json(*f.p, f.now)["consecutive_failures"] == 0);
        CHECK_FALSE(f.p->next_deadline().has_value());
    }

    TEST_CASE("a pool failing to start kernels fails acquires fast, waiters too, until one works") {
        fixture f(1, 1);
        f.p->refill(f.now);
        CHECK(std::holds_alternative<acquire_queued>(f.p->acquire(1, 60s, std::nullopt, f.now)));
        f.p->on_exited("k1", "exit code 1", f.now); // failure #1
        f.advance(500ms);
        f.p->on_exited("k2", "exit code 1", f.now); // failure #2
        CHECK(f.sink.failures.empty());             // two could be bad luck: keep waiting
        f.advance(1000ms);
        f.p->on_exited("k3", "exit code 1; output: ImportError", f.now); // #3: failing
        REQUIRE(f.sink.failures.size() == 1);
        CHECK(f.sink.failures[0] == std::pair<waiter_id, errc>{1, errc::unavailable});
        CHECK(f.p->failing());
        auto fast = f.p->acquire(2, 60s, std::nullopt, f.now);
        REQUIRE(std::holds_alternative<kpool::error>(fast));
        const auto& err = std::get<kpool::error>(fast);
        CHECK(err.code == errc::unavailable);
        CHECK(err.message ==
              "pool 'py' cannot start kernels (3 failures in a row; next attempt in 2.0 s); last "
              "error: kernel k3 exited while starting: exit code 1; output: ImportError");
        CHECK(pool_status_json(*f.p, f.now)["failing"] == true);
        f.advance(2000ms); // retried all the same
        REQUIRE(f.driver.started.size() == 4);
        f.warm("k4");
        CHECK_FALSE(f.p->failing());
        CHECK(granted(f.p->acquire(3, 60s, std::nullopt, f.now)) != nullptr);
    }

    TEST_CASE("warm kernels are watched; one that stops answering is replaced, never handed out") {
        fixture f(2, 2);
        f.p->refill(f.now);
        f.warm("k1");
        f.warm("k2");
        CHECK(f.driver.watched == std::set<std::string>{"k1", "k2"});
        f.p->on_unresponsive("k1", "no kernel_info_reply to a heartbeat within 5.0 s", f.now);
        CHECK(f.driver.stopped == std::vector<std::string>{"k1"});
        CHECK(f.driver.watched == std::set<std::string>{"k2"});
        CHECK(f.p->counters().hung_warm == 1);
        CHECK(f.driver.started.size() == 3); // replacement on its way
        const kernel_entry* k = granted(f.p->acquire(1, 5s, std::nullopt, f.now));
        REQUIRE(k != nullptr);
        CHECK(k->id == "k2");
        CHECK(f.driver.watched.empty());           // leased: hands off
        f.p->on_unresponsive("k2", "late", f.now); // a beat in flight at lease time: ignored
        CHECK(f.p->counters().hung_warm == 1);
        f.p->on_exited("k1", "killed by signal 9", f.now);
        CHECK(f.p->counters().died_warm == 0); // counted once, as hung
        f.p->return_unseen("k2", f.now);
        CHECK(f.driver.watched == std::set<std::string>{"k2"});
    }

    TEST_CASE("a start refused for want of resources is capacity, not a failure, and retried") {
        fixture f(1, 1);
        f.driver.fail_next_start = true;
        f.driver.fail_code = errc::capacity;
        f.p->refill(f.now);
        CHECK(f.p->counters().spawn_failures == 0);
        CHECK(pool_status_json(*f.p, f.now)["consecutive_failures"] == 0);
        auto out = f.p->acquire(1, 5s, std::nullopt, f.now);
        REQUIRE(std::holds_alternative<kpool::error>(out));
        CHECK(std::get<kpool::error>(out).code == errc::capacity);
        CHECK(std::get<kpool::error>(out).message ==
              "no warm kernel in pool 'py' and none can start now: out of file descriptors");
        CHECK(f.p->next_deadline() == f.now + 1000ms);
        f.advance(1000ms);
        CHECK(f.driver.started.size() == 1);
        CHECK(std::holds_alternative<acquire_queued>(f.p->acquire(2, 5s, std::nullopt, f.now)));
    }

    TEST_CASE("a driver that cannot start anything backs off too") {
        fixture f(1, 1);
        f.driver.fail_next_start = true;
        f.p->refill(f.now);
        CHECK(f.p->counters().spawn_failures == 1);
        CHECK(f.p->counters().last_error == "kernelspec 'x': not found");
        CHECK(f.budget.used == 0);
        f.advance(500ms);
        CHECK(f.driver.started.size() == 1);
    }

    TEST_CASE("release stops a leased kernel; anything else is unknown_kernel") {
        fixture f(1, 1);
        f.p->refill(f.now);
        f.warm("k1");
        CHECK(f.p->release("k1", f.now).err().code ==
              errc::unknown_kernel); // warm, never handed out
        REQUIRE(granted(f.p->acquire(1, 5s, std::nullopt, f.now)) != nullptr);
        CHECK(f.p->release("k1", f.now).ok());
        CHECK(f.kernel("k1").state == kernel_state::stopping);
        CHECK(f.driver.stopped == std::vector<std::string>{"k1"});
        CHECK(f.p->release("k1", f.now).err().code == errc::unknown_kernel); // already released
        CHECK(f.p->release("nope", f.now).err().code == errc::unknown_kernel);
    }

    TEST_CASE("an expired lease is stopped") {
        fixture f(1, 1);
        f.p->refill(f.now);
        f.warm("k1");
        REQUIRE(granted(f.p->acquire(1, 5s, 2.0, f.now)) != nullptr);
        CHECK(f.p->next_deadline() == f.now + 2s);
        f.advance(2s);
        CHECK(f.kernel("k1").state == kernel_state::stopping);
        CHECK(f.p->counters().leases_expired == 1);
    }

    TEST_CASE("renew moves a lease's end to lease_s from now; only a leased kernel renews") {
        fixture f(1, 1);
        f.p->refill(f.now);
        f.warm("k1");
        CHECK(f.p->renew("k1", 5, f.now).err().code == errc::unknown_kernel); // warm
        REQUIRE(granted(f.p->acquire(1, 5s, 2.0, f.now)) != nullptr);
        f.advance(1s);
        REQUIRE(f.p->renew("k1", 2, f.now).ok());
        CHECK(f.kernel("k1").lease_deadline == f.now + 2s);
        f.advance(1500ms); // past the first lease's end, not the renewed one's
        CHECK(f.kernel("k1").state == kernel_state::leased);
        f.advance(500ms);
        CHECK(f.kernel("k1").state == kernel_state::stopping);
        CHECK(f.p->renew("k1", 2, f.now).err().code == errc::unknown_kernel);
    }

    TEST_CASE("max_kernels caps starts across pools; capacity when nothing can come") {
        fixture f(2, 2, /*max_kernels=*/1);
        f.p->refill(f.now);
        CHECK(f.driver.started.size() == 1);
        f.warm("k1");
        REQUIRE(granted(f.p->acquire(1, 5s, std::nullopt, f.now)) != nullptr);
        auto o = f.p->acquire(2, 5s, std::nullopt, f.now);
        REQUIRE(std::holds_alternative<kpool::error>(o));
        CHECK(std::get<kpool::error>(o).code == errc::capacity);
        CHECK(f.p->release("k1", f.now).ok());
        // k1 is on its way out, so its room comes back: wait rather than fail.
        CHECK(std::holds_alternative<acquire_queued>(f.p->acquire(3, 5s, std::nullopt, f.now)));
        f.p->on_exited("k1", "exit code 0", f.now);
        CHECK(f.budget.stopping == 0);
        CHECK(f.driver.started.size() == 2); // room again
    }

    TEST_CASE("a kernel whose reply could not be delivered is warm again, first in line") {
        fixture f(2, 2);
        f.p->refill(f.now);
        f.warm("k1");
        f.warm("k2");
        const kernel_entry* k = granted(f.p->acquire(1, 5s, std::nullopt, f.now));
        REQUIRE(k != nullptr);
        const std::string id = k->id;
        f.p->return_unseen(id, f.now);
        CHECK(f.kernel(id).state == kernel_state::warm);
        CHECK(f.p->counters().acquired == 0);
        const kernel_entry* again = granted(f.p->acquire(2, 5s, std::nullopt, f.now));
        REQUIRE(again != nullptr);
        CHECK(again->id == id);
    }

    TEST_CASE("a waiter that cannot be reached does not take the kernel") {
        fixture f(1, 1);
        f.p->refill(f.now);
        CHECK(std::holds_alternative<acquire_queued>(f.p->acquire(1, 5s, std::nullopt, f.now)));
        f.sink.reachable = false;
        f.warm("k1");
        CHECK(f.kernel("k1").state == kernel_state::warm);
        CHECK(f.p->counters().acquired == 0);
    }

    TEST_CASE("shut_down fails waiters, stops every kernel and refills nothing") {
        fixture f(2, 1);
        f.p->refill(f.now);
        f.warm("k1");
        REQUIRE(granted(f.p->acquire(1, 5s, std::nullopt, f.now)) != nullptr);
        f.p->refill(f.now);
        CHECK(std::holds_alternative<acquire_queued>(f.p->acquire(2, 5s, std::nullopt, f.now)));
        f.p->shut_down(f.now);
        CHECK(f.sink.failures == std::vector<std::pair<waiter_id, errc>>{{2, errc::shutting_down}});
        CHECK(f.driver.stopped.size() == f.p->kernels().size());
        const auto started = f.driver.started.size();
        for (const auto& id : std::vector<std::string>(f.driver.stopped)) {
            f.p->on_exited(id, "exit code 0", f.now);
        }
        CHECK(f.driver.started.size() == started);
        CHECK(f.p->kernels().empty());
        CHECK(std::get<kpool::error>(f.p->acquire(3, 5s, std::nullopt, f.now)).code ==
              errc::shutting_down);
    }

    TEST_CASE("resize: shrinking stops unleased surplus (starting first), never a leased kernel") {
        fixture f(3, 3);
        f.p->refill(f.now);
        f.warm("k1");
        f.warm("k2");                                                          // k3 still starting
        REQUIRE(granted(f.p->acquire(1, 5s, std::nullopt, f.now)) != nullptr); // k1 leased
        f.p->refill(f.now); // k4 starts to replace it
        f.p->resize(1, f.now);
        CHECK(f.driver.stopped == std::vector<std::string>{"k3", "k4"});
        CHECK(f.kernel("k1").state == kernel_state::leased);
        CHECK(f.kernel("k2").state == kernel_state::warm);
        f.p->resize(3, f.now);
        CHECK(f.driver.started.size() == 6); // two more to reach 3 idle kernels
        CHECK(f.p->config().size == 3);
    }

    TEST_CASE(
        "reconfigure replaces warm kernels started differently; a fresh start after failures") {
        fixture f(2, 2);
        f.p->refill(f.now);
        f.warm("k1");
        f.warm("k2");
        auto cfg = f.p->config();
        cfg.lease_s = 5;
        f.p->reconfigure(cfg, false, f.now); // same kernels: nothing stops
        CHECK(f.driver.stopped.empty());
        cfg.kernelspec = "other";
        f.p->reconfigure(cfg, true, f.now);
        CHECK(f.driver.stopped == std::vector<std::string>{"k1", "k2"});
        CHECK(f.driver.started.size() == 4); // replacements
        for (int i = 0; i < 3; ++i) {
            f.p->on_exited("k" + std::to_string(3 + i), "exit code 1", f.now);
            f.advance(30s);
        }
        CHECK(f.p->failing());
        f.p->reconfigure(cfg, false, f.now);
        CHECK_FALSE(f.p->failing());
        CHECK_FALSE(f.p->next_deadline().has_value()); // no backoff left to wait out
    }

    TEST_CASE("replace_unleased restarts warm and starting kernels, never a leased one") {
        fixture f(3, 3);
        f.p->refill(f.now);
        f.warm("k1");
        f.warm("k2");                                                          // k3 still starting
        REQUIRE(granted(f.p->acquire(1, 5s, std::nullopt, f.now)) != nullptr); // k1 leased
        f.p->refill(f.now);                                                    // k4 starts
        f.p->replace_unleased(f.now);
        CHECK(f.driver.stopped == std::vector<std::string>{"k3", "k4", "k2"});
        CHECK(f.kernel("k1").state == kernel_state::leased);
        CHECK(f.p->count(kernel_state::starting) == 3); // the pool's size again, all new
        CHECK(f.driver.started.size() == 7);
    }

    TEST_CASE("drain stops idle kernels and refuses acquires until resized; retire is for good") {
        fixture f(2, 2);
        f.p->refill(f.now);
        f.warm("k1");
        REQUIRE(granted(f.p->acquire(1, 5s, std::nullopt, f.now)) != nullptr); // k1 leased
        CHECK(std::holds_alternative<acquire_queued>(f.p->acquire(2, 5s, std::nullopt, f.now)));
        f.p->drain(f.now);
        CHECK(f.sink.failures == std::vector<std::pair<waiter_id, errc>>{{2, errc::unavailable}});
        CHECK(f.p->count(kernel_state::leased) == 1);
        CHECK(f.p->count(kernel_state::warm) + f.p->count(kernel_state::starting) == 0);
        auto refused = f.p->acquire(3, 5s, std::nullopt, f.now);
        CHECK(std::get<kpool::error>(refused).code == errc::unavailable);
        f.p->resize(1, f.now);
        CHECK(std::holds_alternative<acquire_queued>(f.p->acquire(4, 5s, std::nullopt, f.now)));
        f.p->retire(f.now);
        CHECK(f.sink.failures.back() == std::pair<waiter_id, errc>{4, errc::unknown_pool});
        CHECK(std::get<kpool::error>(f.p->acquire(5, 5s, std::nullopt, f.now)).code ==
              errc::unknown_pool);
        const auto started = f.driver.started.size();
        f.p->refill(f.now);
        CHECK(f.driver.started.size() == started);
        CHECK_FALSE(f.p->empty()); // k1 is still leased
        CHECK(f.p->release("k1", f.now).ok());
    }

    TEST_CASE("status reports sizes, counters and each kernel") {
        fixture f(2, 2);
        f.p->refill(f.now);
        f.warm("k1");
        auto s = pool_status_json(*f.p, f.now + 1500ms);
        CHECK(s["name"] == "py");
        CHECK(s["size"] == 2);
        CHECK(s["warm"] == 1);
        CHECK(s["starting"] == 1);
        CHECK(s["leased"] == 0);
        CHECK(s["counters"]["spawn_failures"] == 0);
        REQUIRE(s["kernels"].size() == 2);
        CHECK(s["kernels"][0]["id"] == "k1");
        CHECK(s["kernels"][0]["state"] == "warm");
        CHECK(s["kernels"][0]["age_s"] == doctest::Approx(1.5));
    }
}
