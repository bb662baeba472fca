// sd_notifier: the datagram side of sd_notify(3), without linking libsystemd.
#include "daemon/service/sd_notify.hpp"

#include "loop/logging.hpp"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace kpool::daemon {

sd_notifier sd_notifier::from_environment() {
    sd_notifier n;
    const char* socket_name = std::getenv("NOTIFY_SOCKET");
    if (socket_name == nullptr || (socket_name[0] != '/' && socket_name[0] != '@') ||
        std::strlen(socket_name) >= sizeof(sockaddr_un::sun_path)) {
        return n;
    }
    n.m_address = socket_name;
    if (n.m_address[0] == '@') {
        n.m_address[0] = '\0';
    }
    n.m_fd = loop::unique_fd(::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    // The watchdog applies to us only if WATCHDOG_PID is unset or names this process.
    const char* usec = std::getenv("WATCHDOG_USEC");
    const char* pid = std::getenv("WATCHDOG_PID");
    if (usec != nullptr && (pid == nullptr || std::atol(pid) == ::getpid())) {
        const long long us = std::atoll(usec);
        if (us > 0) {
            n.m_watchdog = std::chrono::milliseconds(std::max(1LL, us / 2000));
        }
    }
    return n;
}

void sd_notifier::send(std::string_view message) {
    if (!m_fd) {
        return;
    }
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, m_address.data(), m_address.size());
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + m_address.size());
    if (::sendto(m_fd.get(), message.data(), message.size(), MSG_NOSIGNAL,
                 reinterpret_cast<const sockaddr*>(&addr), len) < 0 &&
        !m_warned) {
        m_warned = true;
        loop::logger("daemon")->warn("cannot notify systemd: {}", std::strerror(errno));
    }
}

void sd_notifier::status(const std::string& line) {
    if (m_fd && line != m_last_status) {
        m_last_status = line;
        send("STATUS=" + line);
    }
}

} // namespace kpool::daemon
