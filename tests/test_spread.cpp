// client/spread: the choice of daemon for an acquire and when to fail over, as pure code (the
// same policy against three real daemons: tests/integration/test_multi_daemon.py).
#include "client/spread.hpp"

#include <doctest/doctest.h>

#include <set>

using kpool::errc;
using kpool::client::spread;
using kpool::protocol::pool_summary;

TEST_SUITE("spread") {
    const std::vector<std::string> three = {"a", "b", "c"};

    TEST_CASE("fresh views: most warm first, a daemon without the pool last among the up") {
        spread s;
        const auto now = spread::clock::now();
        s.learn_status("a", {{"py", "python3", 1}}, now);
        s.learn_status("b", {{"py", "python3", 5}}, now);
        s.learn_status("c", {{"r", "ir", 9}}, now);
        for (int i = 0; i < 20; ++i) {
            CHECK(s.order("py", three, now) == std::vector<std::string>{"b", "a", "c"});
        }
        CHECK(s.order("r", three, now).front() == "c");
    }

    TEST_CASE("removed and drained pools do not count; an acquire's pool_warm updates the view") {
        spread s;
        const auto now = spread::clock::now();
        pool_summary drained{"py", "python3", 7};
        drained.drained = true;
        s.learn_status("a", {drained}, now);
        s.learn_status("b", {{"py", "python3", 1}}, now);
        s.learn_status("c", {{"py", "python3", 0}}, now);
        CHECK(s.order("py", three, now).front() == "b");
        s.learn_acquired("c", "py", 4);
        CHECK(s.order("py", three, now).front() == "c");
        s.learn_refused("c", "py");
        CHECK(s.order("py", three, now).front() == "b");
    }

    TEST_CASE("a daemon that did not answer goes last for down_for, then is asked again") {
        spread s;
        const auto now = spread::clock::now();
        for (const auto& e : three) {
            s.learn_status(e, {{"py", "python3", 3}}, now);
        }
        s.mark_down("b", now);
        CHECK(s.is_down("b", now));
        CHECK_FALSE(s.stale("b", now)); // down is not stale: no status is read from it
        for (int i = 0; i < 20; ++i) {
            CHECK(s.order("py", three, now).back() == "b");
        }
        const auto later = now + spread::down_for + std::chrono::milliseconds(1);
        CHECK_FALSE(s.is_down("b", later));
        std::set<std::string> firsts;
        for (int i = 0; i < 200; ++i) {
            firsts.insert(s.order("py", three, later).front());
        }
        CHECK(firsts.count("b") == 1);
    }

    TEST_CASE(
        "stale views: the better of two picked at random goes first, so every daemon gets turns") {
        spread s;
        const auto then = spread::clock::now();
        s.learn_status("a", {{"py", "python3", 0}}, then);
        s.learn_status("b", {{"py", "python3", 0}}, then);
        s.learn_status("c", {{"py", "python3", 9}}, then);
        const auto now = then + spread::view_ttl;
        CHECK(s.stale("a", now));
        std::map<std::string, int> firsts;
        for (int i = 0; i < 600; ++i) {
            ++firsts[s.order("py", three, now).front()];
        }
        // c wins every pair it is in (2 of 3 pairs), a and b share the third.
        CHECK(firsts["c"] > 300);
        CHECK(firsts["a"] > 30);
        CHECK(firsts["b"] > 30);
        CHECK(spread().stale("never-read"));
    }

    TEST_CASE("the refusals that fail over, and the wait a later daemon is given") {
        for (errc code :
             {errc::capacity, errc::unavailable, errc::unknown_pool, errc::shutting_down}) {
            CHECK(spread::fails_over({code, ""}));
        }
        for (errc code : {errc::bad_request, errc::timeout, errc::unknown_kernel, errc::internal,
                          errc::unknown_op}) {
            CHECK_FALSE(spread::fails_over({code, ""}));
        }
        using ms = std::chrono::milliseconds;
        CHECK(spread::attempt_timeout_ms(std::nullopt, ms(30000)) == 25000);
        CHECK(spread::attempt_timeout_ms(2000, ms(30000)) == 2000);
        CHECK(spread::attempt_timeout_ms(20000, ms(8000)) == 3000);
        CHECK(spread::attempt_timeout_ms(std::nullopt, ms(3000)) == 0);
    }
}
