// port_registry: five distinct free ports per kernel, never one held by another kernel of ours,
// given back on release; and telling a port someone else bound from a free one.
#include "daemon/process/port_registry.hpp"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <vector>

using namespace kpool::daemon;

TEST_SUITE("port_registry") {
    TEST_CASE("kernels held at once never share a port; released ports are forgotten") {
        port_registry registry;
        std::vector<port_reservation> held;
        std::set<std::uint16_t> seen;
        for (int i = 0; i < 40; ++i) {
            auto r = registry.reserve("127.0.0.1");
            REQUIRE(r.ok());
            for (std::uint16_t port : r->ports()) {
                CHECK(port != 0);
                CHECK(seen.insert(port).second);
            }
            held.push_back(std::move(r).value());
        }
        CHECK(registry.reserved() == 200);
        held.erase(held.begin(), held.begin() + 10);
        CHECK(registry.reserved() == 150);
        port_reservation moved = std::move(held.back());
        held.pop_back();
        CHECK(registry.reserved() == 150);
        held.clear();
        CHECK(registry.reserved() == 5);
        moved = port_reservation();
        CHECK(registry.reserved() == 0);
    }

    TEST_CASE("IPv6 and bad addresses") {
        port_registry registry;
        CHECK(registry.reserve("::1").ok());
        auto bad = registry.reserve("localhost");
        REQUIRE_FALSE(bad.ok());
        CHECK(bad.err().message == "'localhost' is not a numeric IP address");
    }

    TEST_CASE("a port another socket listens on is taken; a closed one is not") {
        const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
        REQUIRE(fd >= 0);
        const int on = 1;
        ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on); // as libzmq binds
        sockaddr_in address{};
        address.sin_family = AF_INET;
        address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0);
        REQUIRE(::listen(fd, 1) == 0);
        socklen_t length = sizeof address;
        REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length) == 0);
        const std::uint16_t port = ntohs(address.sin_port);
        CHECK(port_registry::taken_by_another("127.0.0.1", port));
        ::close(fd);
        CHECK_FALSE(port_registry::taken_by_another("127.0.0.1", port));
    }
}
