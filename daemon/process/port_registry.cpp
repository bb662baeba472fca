// port_registry: ports from a range of ours or from the OS, bookkept so no two kernels of ours
// share one.
#include "daemon/process/port_registry.hpp"

#include "loop/unique_fd.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <fmt/format.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <random>

namespace kpool::daemon {
namespace {

// A socket address for ip:port, or nothing when `ip` is not a numeric address.
struct socket_address {
    sockaddr_storage storage{};
    socklen_t length = 0;
    int family = AF_INET;
};

bool make_address(const std::string& ip, std::uint16_t port, socket_address& out) {
    auto* v4 = reinterpret_cast<sockaddr_in*>(&out.storage);
    if (::inet_pton(AF_INET, ip.c_str(), &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons(port);
        out.length = sizeof(sockaddr_in);
        out.family = AF_INET;
        return true;
    }
    auto* v6 = reinterpret_cast<sockaddr_in6*>(&out.storage);
    if (::inet_pton(AF_INET6, ip.c_str(), &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons(port);
        out.length = sizeof(sockaddr_in6);
        out.family = AF_INET6;
        return true;
    }
    return false;
}

// Binds a new tcp socket (into `fd`) to the address; 0 or -errno.
int bind_tcp(const socket_address& address, bool reuse_address, loop::unique_fd& fd) {
    fd = loop::unique_fd(::socket(address.family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) {
        return -errno;
    }
    if (reuse_address) {
        const int on = 1;
        ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    }
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) !=
        0) {
        return -errno;
    }
    return 0;
}

// A port the OS considers free on `ip` now (bind to port 0, read it back, close).
result<std::uint16_t> free_port(const std::string& ip) {
    socket_address address;
    if (!make_address(ip, 0, address)) {
        return error{errc::internal, "'" + ip + "' is not a numeric IP address"};
    }
    loop::unique_fd fd;
    if (const int rc = bind_tcp(address, false, fd); rc < 0) {
        return error{errc::capacity,
                     "cannot find a free port on " + ip + ": " + std::strerror(-rc)};
    }
    sockaddr_storage bound{};
    socklen_t length = sizeof bound;
    if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&bound), &length) != 0) {
        return error{errc::internal, std::string("getsockname: ") + std::strerror(errno)};
    }
    return bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                       : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
}

} // namespace

port_reservation::port_reservation(port_reservation&& other) noexcept
    : m_owner(other.m_owner), m_ports(other.m_ports) {
    other.m_owner = nullptr;
}

port_reservation& port_reservation::operator=(port_reservation&& other) noexcept {
    if (this != &other) {
        give_back();
        m_owner = other.m_owner;
        m_ports = other.m_ports;
        other.m_owner = nullptr;
    }
    return *this;
}

port_reservation::~port_reservation() { give_back(); }

void port_reservation::give_back() noexcept {
    if (m_owner != nullptr) {
        for (std::uint16_t port : m_ports) {
            m_owner->m_reserved.erase(port);
        }
        m_owner = nullptr;
    }
}

std::optional<port_range> ephemeral_port_range() {
    std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
    unsigned first = 0;
    unsigned last = 0;
    if (!(in >> first >> last) || first == 0 || first > last || last > 65535) {
        return std::nullopt;
    }
    return port_range{static_cast<std::uint16_t>(first), static_cast<std::uint16_t>(last)};
}

kernel_port_plan plan_kernel_ports(const config::daemon_config& cfg,
                                   std::optional<port_range> ephemeral) {
    using source = config::kernel_port_source;
    const std::string os_range =
        ephemeral ? fmt::format("the OS's ephemeral range {}-{}", ephemeral->first, ephemeral->last)
                  : std::string("the OS's ephemeral range (unreadable)");
    if (cfg.kernel_ports == source::ephemeral) {
        return {std::nullopt,
                "kernel_ports = \"ephemeral\": the OS's choice of port, from " + os_range};
    }
    if (cfg.kernel_ports == source::range) {
        const port_range range{cfg.kernel_ports_first, cfg.kernel_ports_last};
        const bool overlaps =
            ephemeral && range.first <= ephemeral->last && ephemeral->first <= range.last;
        return {range, fmt::format("kernel_ports = \"{}-{}\"{}", range.first, range.last,
                                   overlaps ? ", which overlaps " + os_range +
                                                  " (jupyter_client's kernels and outgoing "
                                                  "connections may take a port of ours)"
                                            : std::string())};
    }
    // Room for every kernel this daemon may hold, and for other kpoolds on the host.
    const std::size_t wanted =
        std::max<std::size_t>(1000, 5 * static_cast<std::size_t>(cfg.max_kernels));
    if (ephemeral && 65535u - ephemeral->last >= wanted) {
        const port_range above{static_cast<std::uint16_t>(ephemeral->last + 1), 65535};
        return {above, fmt::format("auto: above {}, where jupyter_client's kernels and outgoing "
                                   "connections take theirs",
                                   os_range)};
    }
    return {std::nullopt, fmt::format("auto: the OS's choice of port, from {} ({})", os_range,
                                      ephemeral ? fmt::format("only {} ports above it, {} wanted",
                                                              65535u - ephemeral->last, wanted)
                                                : std::string("nothing known above it"))};
}

void port_registry::draw_from(std::optional<port_range> range) {
    if (range == m_range) {
        return;
    }
    m_range = range;
    if (m_range) {
        std::random_device seed;
        m_cursor = static_cast<std::uint32_t>(seed() % m_range->size());
    }
}

result<std::uint16_t> port_registry::next_in_range(const std::string& ip,
                                                   const std::array<std::uint16_t, 5>& taken,
                                                   std::size_t count) {
    const port_range range = *m_range;
    for (std::size_t tried = 0; tried < range.size(); ++tried) {
        const auto port = static_cast<std::uint16_t>(range.first + m_cursor);
        m_cursor = static_cast<std::uint32_t>((m_cursor + 1) % range.size());
        if (held(port, taken, count)) {
            continue;
        }
        socket_address address;
        if (!make_address(ip, port, address)) {
            return error{errc::internal, "'" + ip + "' is not a numeric IP address"};
        }
        // As libzmq binds (SO_REUSEADDR): a port whose last connections linger in TIME_WAIT
        // is as good as any.
        loop::unique_fd probe;
        const int rc = bind_tcp(address, true, probe);
        if (rc == 0) {
            return port;
        }
        if (rc != -EADDRINUSE) {
            return error{errc::capacity,
                         fmt::format("cannot bind {} port {}: {}", ip, port, std::strerror(-rc))};
        }
    }
    return error{errc::capacity,
                 fmt::format("no free port on {} in kernel_ports {}-{} ({} held by our kernels)",
                             ip, range.first, range.last, m_reserved.size())};
}

result<std::uint16_t> port_registry::next_from_os(const std::string& ip,
                                                  const std::array<std::uint16_t, 5>& taken,
                                                  std::size_t count) {
    // The OS hands out ephemeral ports in sequence, so a port one of our kernels holds comes
    // back only after the whole range went round: a few tries are plenty.
    constexpr int tries = 64;
    for (int tried = 0; tried < tries; ++tried) {
        auto port = free_port(ip);
        if (!port || !held(*port, taken, count)) {
            return port;
        }
    }
    return error{errc::capacity, "no free port on " + ip + " that no kernel holds"};
}

bool port_registry::held(std::uint16_t port, const std::array<std::uint16_t, 5>& taken,
                         std::size_t count) const {
    const auto* end = taken.begin() + static_cast<long>(count);
    return m_reserved.count(port) != 0 || std::find(taken.begin(), end, port) != end;
}

result<port_reservation> port_registry::reserve(const std::string& ip) {
    std::array<std::uint16_t, 5> ports{};
    for (std::size_t i = 0; i < ports.size(); ++i) {
        auto port = m_range ? next_in_range(ip, ports, i) : next_from_os(ip, ports, i);
        if (!port) {
            return port.err();
        }
        ports[i] = *port;
    }
    m_reserved.insert(ports.begin(), ports.end());
    return port_reservation(this, ports);
}

bool port_registry::taken_by_another(const std::string& ip, std::uint16_t port) {
    socket_address address;
    if (!make_address(ip, port, address)) {
        return false;
    }
    loop::unique_fd probe;
    return bind_tcp(address, true, probe) == -EADDRINUSE;
}

} // namespace kpool::daemon
