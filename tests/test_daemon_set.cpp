// client/daemon_set: endpoint lists as the CLI reads them (the choice of daemon itself:
// tests/test_spread.cpp, and against three real daemons tests/integration/test_multi_daemon.py).
#include "client/daemon_set.hpp"

#include <doctest/doctest.h>

using kpool::client::parse_endpoints;

TEST_SUITE("daemon set") {
    TEST_CASE("a list names each daemon once, in order; dns: names every address") {
        auto list = parse_endpoints("ipc:///run/a, tcp://10.0.0.2:5555 ,ipc:///run/a,");
        REQUIRE(list);
        CHECK(*list == std::vector<std::string>{"ipc:///run/a", "tcp://10.0.0.2:5555"});
        auto dns = parse_endpoints("dns:localhost:5555");
        REQUIRE(dns);
        CHECK(*dns == std::vector<std::string>{"tcp://127.0.0.1:5555"});
    }

    TEST_CASE("an empty list or a malformed dns: entry is a usage error") {
        for (const char* bad : {"", " , ", "dns:localhost", "dns::5", "dns:host:port",
                                "dns:no-such-host.invalid:5"}) {
            CAPTURE(bad);
            auto r = parse_endpoints(bad);
            REQUIRE_FALSE(r);
            CHECK(r.err().code == kpool::errc::bad_request);
        }
    }
}
