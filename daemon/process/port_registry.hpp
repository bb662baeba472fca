// The tcp ports kpoold hands to its kernels.
//
// Kernels get their five ports from the daemon, in the connection file, before they start: not
// every kernel binds random ports and writes them back as ipykernel does (IRkernel and
// xeus-python bind exactly what the file says). A port found free is only free until the kernel
// binds it, a window in which someone else can take it. jupyter_client (a notebook server, a
// papermill run) finds its kernels' ports by binding port 0, and outgoing connections take
// theirs, from the OS's ephemeral range; so by default ours come from above that range, where
// neither draws (`plan_kernel_ports`), and a kpoold beside a notebook server never breaks the
// server's kernels or has its own broken. Two more defences: the registry remembers every port
// handed to a live or starting kernel, so two of our kernels never get the same one, and
// `taken_by_another` tells a kernel that lost its port in that window (to another kpoold, say)
// from one that failed for its own reasons, so the first can be started again with fresh ports.
#pragma once

#include "protocol/result.hpp"

#include "config/config.hpp"

#include <array>
#include <cstdint>
#include <optional>
#include <set>
#include <string>

namespace kpool::daemon {

struct port_range {
    std::uint16_t first = 0;
    std::uint16_t last = 0;
    std::size_t size() const { return std::size_t{last} - first + 1; }
    bool operator==(const port_range&) const = default;
};

// The OS's ephemeral range (net.ipv4.ip_local_port_range, also IPv6's), or nothing if unreadable.
std::optional<port_range> ephemeral_port_range();

// Where the ports come from, and why, for the log and status.
struct kernel_port_plan {
    std::optional<port_range> range; // nothing: the OS's choice of port 0
    std::string why;
};

// `kernel_ports` of the config against the OS's ephemeral range: "auto" takes the ports above it
// when they are enough for a host's worth of kernels, the OS's choice otherwise.
kernel_port_plan plan_kernel_ports(const config::daemon_config& cfg,
                                   std::optional<port_range> ephemeral);

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
    // Ports from `range` (nothing: the OS's choice) for reservations from now on; those held
    // keep theirs. The walk through a range starts at a random port, so kpoolds sharing a host
    // rarely offer the same port at the same moment.
    void draw_from(std::optional<port_range> range);
    const std::optional<port_range>& range() const { return m_range; }

    // Five distinct ports free on `ip` (a numeric IPv4 or IPv6 address) right now and held by
    // no other kernel of ours. An error when there are none to give (or `ip` is not ours).
    result<port_reservation> reserve(const std::string& ip);

    // Whether some socket (not one of ours: the caller's kernel is gone) holds `port` on `ip`.
    // Probed with SO_REUSEADDR, as libzmq binds, so connections lingering in TIME_WAIT from
    // the dead kernel do not count.
    static bool taken_by_another(const std::string& ip, std::uint16_t port);

    std::size_t reserved() const { return m_reserved.size(); }

private:
    friend class port_reservation;
    // The next port for a reservation that has `taken[0..count)` so far.
    result<std::uint16_t> next_in_range(const std::string& ip,
                                        const std::array<std::uint16_t, 5>& taken,
                                        std::size_t count);
    result<std::uint16_t> next_from_os(const std::string& ip,
                                       const std::array<std::uint16_t, 5>& taken,
                                       std::size_t count);
    bool held(std::uint16_t port, const std::array<std::uint16_t, 5>& taken,
              std::size_t count) const;

    std::set<std::uint16_t> m_reserved;
    std::optional<port_range> m_range;
    std::uint32_t m_cursor = 0; // the next port a range walk tries
};

} // namespace kpool::daemon
