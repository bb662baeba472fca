// port_registry: ports from the OS, bookkept so no two kernels of ours share one.
#include "daemon/process/port_registry.hpp"

#include "daemon/loop/unique_fd.hpp"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

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
int bind_tcp(const socket_address& address, bool reuse_address, unique_fd& fd) {
    fd = unique_fd(::socket(address.family, SOCK_STREAM | SOCK_CLOEXEC, 0));
    if (!fd) {
        return -errno;
    }
    if (reuse_address) {
        const int on = 1;
        ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
    }
    if (::bind(fd.get(), reinterpret_cast<const sockaddr*>(&address.storage), address.length) != 0) {
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
    unique_fd fd;
    if (const int rc = bind_tcp(address, false, fd); rc < 0) {
        return error{errc::capacity, "cannot find a free port on " + ip + ": " + std::strerror(-rc)};
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

result<port_reservation> port_registry::reserve(const std::string& ip) {
    std::array<std::uint16_t, 5> ports{};
    // The OS hands out ephemeral ports in sequence, so a port one of our kernels holds comes
    // back only after the whole range went round: a few tries are plenty.
    constexpr int tries_per_port = 64;
    for (std::size_t i = 0; i < ports.size(); ++i) {
        int tries = 0;
        for (;;) {
            auto port = free_port(ip);
            if (!port) {
                return port.err();
            }
            const bool ours = m_reserved.count(*port) != 0 ||
                              std::find(ports.begin(), ports.begin() + static_cast<long>(i),
                                        *port) != ports.begin() + static_cast<long>(i);
            if (!ours) {
                ports[i] = *port;
                break;
            }
            if (++tries == tries_per_port) {
                return error{errc::capacity, "no free port on " + ip + " that no kernel holds"};
            }
        }
    }
    m_reserved.insert(ports.begin(), ports.end());
    return port_reservation(this, ports);
}

bool port_registry::taken_by_another(const std::string& ip, std::uint16_t port) {
    socket_address address;
    if (!make_address(ip, port, address)) {
        return false;
    }
    unique_fd probe;
    return bind_tcp(address, true, probe) == -EADDRINUSE;
}

} // namespace kpool::daemon
