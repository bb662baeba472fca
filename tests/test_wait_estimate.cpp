// wait_estimate: a refused caller's Retry-After from how fast the kernels requests hold come
// round, each refusal a place in line (serve/wait_estimate.hpp). Time is given: no test waits.
#include "serve/wait_estimate.hpp"

#include <doctest/doctest.h>

#include <vector>

using kpool::serve::wait_estimate;
using namespace std::chrono_literals;

namespace {

// `count` requests that each held a kernel for `hold`, the last given back at `end`.
void holds(wait_estimate& w, wait_estimate::clock::time_point end, int count,
           std::chrono::milliseconds hold) {
    for (int i = 0; i < count; ++i) {
        w.took(end - hold);
        w.returned(end - hold, end);
    }
}

} // namespace

TEST_SUITE("wait_estimate") {
    TEST_CASE("before any request held a kernel: the fallback, at least 1 s and at most 60") {
        wait_estimate w;
        const auto now = wait_estimate::clock::now();
        CHECK_FALSE(w.turnover(now, 0.5).has_value());
        CHECK(w.refused(now, 0, 0.5, 0.4) == 1);
        CHECK(w.refused(now, 0, 0.5, 2.2) == 3);
        CHECK(w.refused(now, 0, 0.5, 500) == 60);
    }

    TEST_CASE("kernels come round at those held over a hold plus a warm-up (Little's law)") {
        wait_estimate w;
        const auto now = wait_estimate::clock::now();
        holds(w, now - 1s, 5, 1500ms);
        for (int i = 0; i < 4; ++i) {
            w.took(now - 500ms); // four held now
        }
        REQUIRE(w.turnover(now, 0.5).has_value());
        CHECK(*w.turnover(now, 0.5) == doctest::Approx(4 / (1.5 + 0.5)));
        // None given back yet: the oldest holder's age is a lower bound of a hold.
        wait_estimate fresh;
        fresh.took(now - 3s);
        fresh.took(now - 1s);
        CHECK(*fresh.turnover(now, 0) == doctest::Approx(2 / 3.0));
        // A kernel given back unused (a dead spare) is no hold: the oldest holder still says.
        fresh.returned(now - 1s, now, false);
        CHECK(*fresh.turnover(now, 0) == doctest::Approx(2 / 3.0));
    }

    TEST_CASE("the kernels in rotation are the recent peak of those held, not this instant's") {
        wait_estimate w;
        const auto now = wait_estimate::clock::now();
        for (int i = 0; i < 3; ++i) {
            w.took(now - 2s);
        }
        w.returned(now - 2s, now - 500ms);
        w.returned(now - 2s, now - 500ms); // between requests: one held now, three in rotation
        CHECK(*w.turnover(now, 0.5) == doctest::Approx(3 / (2.0 + 0.5)));
        CHECK(*w.turnover(now + 40s, 0.5) ==
              doctest::Approx(1 / (42.0 + 0.5))); // the peak is old news
    }

    TEST_CASE("each refusal is told a later turn: those waiting, those told before, then it") {
        wait_estimate w;
        const auto now = wait_estimate::clock::now();
        holds(w, now, 8, 1000ms);
        for (int i = 0; i < 2; ++i) {
            w.took(now);
        }
        // 2 held, 1 s each, no warm-up: 2 come round per second. 3 waiting inside: the first
        // refused is 4th in line (2 s), the 8th is 11th (5.5 -> 6 s).
        std::vector<int> told;
        for (int i = 0; i < 8; ++i) {
            told.push_back(w.refused(now, 3, 0, 1));
        }
        CHECK(told.front() == 2);
        CHECK(told.back() == 6);
        for (std::size_t i = 1; i < told.size(); ++i) {
            CHECK(told[i] >= told[i - 1]);
        }
        // Once their turns have come, the line is short again (the holders' ages aside).
        wait_estimate later;
        holds(later, now, 8, 1000ms);
        later.took(now + 10s);
        later.took(now + 10s);
        for (int i = 0; i < 8; ++i) {
            later.refused(now, 3, 0, 1);
        }
        CHECK(later.refused(now + 10s, 0, 0, 1) == 1);
    }

    TEST_CASE("a turnover too slow for the line is held at 60 s") {
        wait_estimate w;
        const auto now = wait_estimate::clock::now();
        holds(w, now, 4, 30s);
        w.took(now);
        CHECK(w.refused(now, 20, 1, 1) == 60);
    }
}
