// port_registry: five distinct free ports per kernel, never one held by another kernel of ours,
// given back on release, from the OS or from a range that skips ports others listen on; where
// kernel_ports puts them; and telling a port someone else bound from a free one.
#include "daemon/process/port_registry.hpp"

#include <doctest/doctest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <set>
#include <vector>

using namespace kpool::daemon;

namespace {
// A socket listening on 127.0.0.1:port as libzmq's would; -1 if the port is not free.
int listen_on(std::uint16_t port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    address.sin_port = htons(port);
    if (::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) != 0 ||
        ::listen(fd, 1) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

kpool::config::daemon_config ports_config(kpool::config::kernel_port_source source,
                                          int max_kernels = 64) {
    kpool::config::daemon_config cfg;
    cfg.kernel_ports = source;
    cfg.max_kernels = max_kernels;
    return cfg;
}
} // namespace

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

    TEST_CASE(
        "a range: every port from it, ports others listen on skipped, a clear error when full") {
        // Below Linux's ephemeral range and kpoold's default (above it): nobody else's.
        const port_range range{29100, 29111};
        const int other_a = listen_on(29103);
        const int other_b = listen_on(29108);
        REQUIRE(other_a >= 0);
        REQUIRE(other_b >= 0);
        port_registry registry;
        registry.draw_from(range);
        CHECK(registry.range() == range);
        std::set<std::uint16_t> seen;
        std::vector<port_reservation> held;
        for (int i = 0; i < 2; ++i) {
            auto r = registry.reserve("127.0.0.1");
            REQUIRE(r.ok());
            for (std::uint16_t port : r->ports()) {
                CHECK(port >= range.first);
                CHECK(port <= range.last);
                CHECK(port != 29103);
                CHECK(port != 29108);
                CHECK(seen.insert(port).second);
            }
            held.push_back(std::move(r).value());
        }
        auto full = registry.reserve("127.0.0.1");
        REQUIRE_FALSE(full.ok());
        CHECK(full.err().message ==
              "no free port on 127.0.0.1 in kernel_ports 29100-29111 (10 held by our kernels)");
        CHECK(registry.reserved() == 10);
        ::close(other_a);
        held.pop_back(); // five back, and the listener gone: room for one kernel again
        CHECK(registry.reserve("127.0.0.1").ok());
        ::close(other_b);
        registry.draw_from(std::nullopt); // back to the OS's choice; held ports stay held
        CHECK_FALSE(registry.range());
        CHECK(registry.reserve("127.0.0.1").ok());
    }

    TEST_CASE(
        "kernel_ports: auto takes the ports above the OS's ephemeral range when there is room") {
        using kpool::config::kernel_port_source;
        const port_range linux_default{32768, 60999};
        auto plan = plan_kernel_ports(ports_config(kernel_port_source::automatic), linux_default);
        REQUIRE(plan.range);
        CHECK(*plan.range == port_range{61000, 65535});
        CHECK(plan.why ==
              "auto: above the OS's ephemeral range 32768-60999, where jupyter_client's "
              "kernels and outgoing connections take theirs");

        plan =
            plan_kernel_ports(ports_config(kernel_port_source::automatic), port_range{1024, 65000});
        CHECK_FALSE(plan.range);
        CHECK(plan.why == "auto: the OS's choice of port, from the OS's ephemeral range 1024-65000 "
                          "(only 535 ports above it, 1000 wanted)");
        plan = plan_kernel_ports(ports_config(kernel_port_source::automatic, 4096), linux_default);
        CHECK_FALSE(plan.range); // 4536 ports for up to 4096 kernels: not enough
        plan = plan_kernel_ports(ports_config(kernel_port_source::automatic), std::nullopt);
        CHECK_FALSE(plan.range);

        plan = plan_kernel_ports(ports_config(kernel_port_source::ephemeral), linux_default);
        CHECK_FALSE(plan.range);
        CHECK(plan.why == "kernel_ports = \"ephemeral\": the OS's choice of port, from the OS's "
                          "ephemeral range 32768-60999");

        auto cfg = ports_config(kernel_port_source::range);
        cfg.kernel_ports_first = 40000;
        cfg.kernel_ports_last = 40999;
        plan = plan_kernel_ports(cfg, linux_default);
        REQUIRE(plan.range);
        CHECK(*plan.range == port_range{40000, 40999});
        CHECK(plan.why.find("overlaps the OS's ephemeral range 32768-60999") != std::string::npos);
        cfg.kernel_ports_first = 20000;
        cfg.kernel_ports_last = 20999;
        CHECK(plan_kernel_ports(cfg, linux_default).why == "kernel_ports = \"20000-20999\"");
    }

    TEST_CASE("the OS's ephemeral range is read") {
        const auto range = ephemeral_port_range();
        REQUIRE(range); // Linux has one
        CHECK(range->first >= 1);
        CHECK(range->first <= range->last);
    }
}
