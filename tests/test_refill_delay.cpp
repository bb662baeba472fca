// daemon/core/refill_delay.hpp: the config's value where set (the pool's before the daemon's),
// else a default by launcher.
#include "daemon/core/refill_delay.hpp"

#include <doctest/doctest.h>

using kpool::daemon::refill_delay_for;
namespace config = kpool::config;

TEST_SUITE("refill delay") {
    TEST_CASE("unset: 50 ms for forked kernels, 1 s for spawned ones") {
        config::daemon_config d;
        config::pool_config p;
        p.name = "py";
        const auto forked = refill_delay_for(d, p, true);
        CHECK(forked.duration() == std::chrono::milliseconds(50));
        CHECK(forked.why("py").find("forked") != std::string::npos);
        const auto spawned = refill_delay_for(d, p, false);
        CHECK(spawned.duration() == std::chrono::milliseconds(1000));
        CHECK(spawned.why("py").find("spawned") != std::string::npos);
    }

    TEST_CASE("[daemon] refill_delay_s applies to every pool, whatever its launcher") {
        config::daemon_config d;
        d.refill_delay_s = 0.2;
        config::pool_config p;
        p.name = "py";
        for (bool forks : {true, false}) {
            const auto delay = refill_delay_for(d, p, forks);
            CHECK(delay.duration() == std::chrono::milliseconds(200));
            CHECK(delay.why("py") == "[daemon] refill_delay_s");
        }
        d.refill_delay_s = 0.0; // at once
        CHECK(refill_delay_for(d, p, false).duration().count() == 0);
    }

    TEST_CASE("a pool's own refill_delay_s wins over the daemon's") {
        config::daemon_config d;
        d.refill_delay_s = 0.2;
        config::pool_config p;
        p.name = "py";
        p.refill_delay_s = 3.0;
        const auto delay = refill_delay_for(d, p, false);
        CHECK(delay.duration() == std::chrono::milliseconds(3000));
        CHECK(delay.why("py") == "[pools.py] refill_delay_s");
        p.refill_delay_s = 0.0004; // rounds to whole milliseconds
        CHECK(refill_delay_for(d, p, true).duration().count() == 0);
    }
}
