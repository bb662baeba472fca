// systemd's notification protocol (sd_notify(3)), spoken directly: one datagram per message to
// the AF_UNIX socket named by $NOTIFY_SOCKET (a path, or "@name" in the abstract namespace).
// Without $NOTIFY_SOCKET (not under systemd, or Type= is not notify) every call does nothing.
#pragma once

#include "loop/unique_fd.hpp"

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

namespace kpool::daemon {

class sd_notifier {
public:
    // Reads $NOTIFY_SOCKET, $WATCHDOG_USEC and $WATCHDOG_PID.
    static sd_notifier from_environment();

    bool enabled() const { return static_cast<bool>(m_fd); }
    // Sends "READY=1", "STATUS=...", "WATCHDOG=1", ... (several lines at once are fine).
    // Failures are logged once and otherwise ignored: systemd's absence must not stop kpoold.
    void send(std::string_view message);
    // Sends STATUS=<line> when the line differs from the last one sent.
    void status(const std::string& line);
    // How often to send WATCHDOG=1 (half the watchdog timeout), when systemd asks for it.
    std::optional<std::chrono::milliseconds> watchdog_interval() const { return m_watchdog; }

private:
    loop::unique_fd m_fd;
    std::string m_address; // sun_path, '\0'-prefixed for the abstract namespace
    std::optional<std::chrono::milliseconds> m_watchdog;
    std::string m_last_status;
    bool m_warned = false;
};

} // namespace kpool::daemon
