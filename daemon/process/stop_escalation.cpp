// stop_escalation: ask, (hurry,) more graces while the kernel works, then SIGTERM, then SIGKILL.
#include "daemon/process/stop_escalation.hpp"

#include <csignal>

namespace kpool::daemon {

stop_escalation::stop_escalation(uv_loop_t* loop, std::chrono::milliseconds grace, steps s,
                                 std::chrono::milliseconds limit)
    : m_grace(grace), m_limit(limit), m_steps(std::move(s)), m_timer(loop) {}

void stop_escalation::begin(bool ask_first) {
    if (!ask_first) {
        terminate();
        return;
    }
    m_steps.ask();
    m_asked_at = std::chrono::steady_clock::now();
    m_cpu_seen = m_steps.cpu_used ? m_steps.cpu_used() : 0;
    m_timer.start(m_grace, [this] { asked_grace_over(); });
}

void stop_escalation::asked_grace_over() {
    if (m_steps.hurry && m_steps.hurry()) {
        m_cpu_seen = m_steps.cpu_used ? m_steps.cpu_used() : 0; // its idle grace proves nothing
        m_timer.start(m_grace, [this] { working_grace_over(); });
        return;
    }
    working_grace_over();
}

void stop_escalation::working_grace_over() {
    if (still_working()) {
        if (m_steps.working) {
            m_steps.working(std::chrono::duration<double>(std::chrono::steady_clock::now() - m_asked_at).count());
        }
        m_timer.start(m_grace, [this] { working_grace_over(); });
        return;
    }
    terminate();
}

bool stop_escalation::still_working() {
    if (!m_steps.cpu_used || m_grace.count() == 0 ||
        std::chrono::steady_clock::now() + m_grace > m_asked_at + m_limit) {
        return false;
    }
    const unsigned long long used = m_steps.cpu_used();
    const bool grew = used > m_cpu_seen;
    m_cpu_seen = used;
    return grew;
}

void stop_escalation::terminate() {
    m_steps.signal(SIGTERM);
    m_timer.start(m_grace, [this] {
        m_steps.ignored_term();
        m_steps.signal(SIGKILL);
    });
}

} // namespace kpool::daemon
