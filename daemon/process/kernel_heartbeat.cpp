// kernel_heartbeat: one beat at a time, each with its deadline.
#include "daemon/process/kernel_heartbeat.hpp"

#include <fmt/format.h>

namespace kpool::daemon {

kernel_heartbeat::kernel_heartbeat(uv_loop_t* loop, std::chrono::milliseconds interval,
                                   std::chrono::milliseconds timeout, callbacks cb)
    : m_interval(interval), m_timeout(timeout), m_cb(std::move(cb)), m_next(loop),
      m_deadline(loop) {}

void kernel_heartbeat::start() {
    if (m_interval.count() > 0) {
        m_next.start(
            m_interval, [this] { beat(); }, m_interval);
    }
}

void kernel_heartbeat::stop() {
    m_next.stop();
    m_deadline.stop();
    m_in_flight = false;
}

bool kernel_heartbeat::answered() {
    if (!m_in_flight) {
        return false;
    }
    m_in_flight = false;
    m_deadline.stop();
    return true;
}

void kernel_heartbeat::beat() {
    if (m_in_flight || !m_cb.send_beat()) {
        return; // the last beat is still within its deadline, or this one could not go
    }
    m_in_flight = true;
    m_deadline.start(m_timeout, [this] {
        stop();
        m_cb.missed(fmt::format("no kernel_info_reply to a heartbeat within {:.1f} s",
                                std::chrono::duration<double>(m_timeout).count()));
    });
}

} // namespace kpool::daemon
