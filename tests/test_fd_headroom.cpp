// fd_headroom: counted at most once a second, starts estimated in between, refused near the limit.
#include "daemon/process/fd_headroom.hpp"

#include <doctest/doctest.h>

using namespace kpool::daemon;
using namespace std::chrono_literals;

TEST_SUITE("fd headroom") {
    TEST_CASE("counts once a second, estimates starts in between, and refuses near the limit") {
        int open = 100;
        int counted = 0;
        long limit = 100 + 32 + 10 * 3; // room for three starts
        fd_headroom h(
            [&] {
                ++counted;
                return open;
            },
            [&] { return limit; });
        auto t = std::chrono::steady_clock::time_point{} + 100s;
        CHECK(h.reserve_for_start(t));
        CHECK(counted == 1);
        CHECK(h.reserve_for_start(t + 10ms));
        CHECK(h.reserve_for_start(t + 20ms));
        CHECK(counted == 1); // no listing per start
        // The estimate says no: counted afresh, and the real count says no too.
        open = 130;
        auto refused = h.reserve_for_start(t + 30ms);
        REQUIRE_FALSE(refused);
        CHECK(counted == 2);
        CHECK(refused.err().code == kpool::errc::capacity);
        CHECK(refused.err().message.starts_with("out of file descriptors (130 of 162 open"));
        // Kernels exit and free their descriptors: the next start counts afresh.
        open = 100;
        h.released();
        CHECK(h.reserve_for_start(t + 40ms));
        CHECK(counted == 3);
        // A second later the count is refreshed even when the estimate would fit.
        CHECK(h.reserve_for_start(t + 2s));
        CHECK(counted == 4);
    }

    TEST_CASE("no limit, no checks") {
        int counted = 0;
        fd_headroom h(
            [&] {
                ++counted;
                return 1 << 20;
            },
            [] { return 0L; });
        CHECK(h.reserve_for_start(std::chrono::steady_clock::now()));
        CHECK(counted == 0);
    }
}
