// The tcp ports kpoold hands to its kernels.
//
// Kernels get their five ports from the daemon, in the connection file, before they start: not
// every kernel binds random ports and writes them back as ipykernel does (IRkernel and
// xeus-python bind exactly what the file says). A port is found the way jupyter_client finds
// one, by binding port 0 and closing, which leaves a window in which someone else can take it.
// Two defences: the registry remembers every port handed to a live or starting kernel, so two
// of our kernels never get the same one however the OS recycles ports, and `taken_by_another`
// tells a kernel that died because another process bound its port in that window from one that
// failed for its own reasons, so the first can be started again with fresh ports.
#pragma once

#include "protocol/result.hpp"

#include <array>
#include <cstdint>
#include <set>
#include <string>

namespace kpool::daemon {

class port_registry;

// Five ports held for one kernel; given back when destroyed.
class port_reservation {
public:
    port_reservation() = default;
    port_reservation(port_reservation&& other) noexcept;
    port_reservation& operator=(port_reservation&& other) noexcept;
    port_reservation(const port_reservation&) = delete;
    port_reservation& operator=(const port_reservation&) = delete;
    ~port_reservation();

    // shell, iopub, stdin, control, hb
    const std::array<std::uint16_t, 5>& ports() const { return m_ports; }

private:
    friend class port_registry;
    port_reservation(port_registry* owner, std::array<std::uint16_t, 5> ports)
        : m_owner(owner), m_ports(ports) {}
    void give_back() noexcept;

    port_registry* m_owner = nullptr;
    std::array<std::uint16_t, 5> m_ports{};
};

class port_registry {
public:
    // Five distinct ports free on `ip` (a numeric IPv4 or IPv6 address) right now and held by
    // no other kernel of ours. An error when the OS has none to give (or `ip` is not ours).
    result<port_reservation> reserve(const std::string& ip);

    // Whether some socket (not one of ours: the caller's kernel is gone) holds `port` on `ip`.
    // Probed with SO_REUSEADDR, as libzmq binds, so connections lingering in TIME_WAIT from
    // the dead kernel do not count.
    static bool taken_by_another(const std::string& ip, std::uint16_t port);

    std::size_t reserved() const { return m_reserved.size(); }

private:
    friend class port_reservation;
    std::set<std::uint16_t> m_reserved;
};

} // namespace kpool::daemon
