// stop_escalation: ask, (hurry,) more graces while the kernel starves, then SIGTERM, then SIGKILL.
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
    m_waited = m_steps.cpu_waited ? m_steps.cpu_waited() : 0;
    m_timer.start(m_grace, [this] { asked_grace_over(); });
}

void stop_escalation::asked_grace_over() {
    if (m_steps.hurry && m_steps.hurry()) {
        // Its grace at idle priority was starved by design: the next one is at normal priority.
        m_waited = m_steps.cpu_waited ? m_steps.cpu_waited() : 0;
        m_timer.start(m_grace, [this] { grace_over(); });
        return;
    }
    grace_over();
}

void stop_escalation::grace_over() {
    if (was_starved()) {
        if (m_steps.starved) {
            m_steps.starved(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - m_asked_at)
                    .count());
        }
        m_timer.start(m_grace, [this] { grace_over(); });
        return;
    }
    terminate();
}

bool stop_escalation::was_starved() {
    if (!m_steps.cpu_waited || m_grace.count() == 0 ||
        std::chrono::steady_clock::now() + m_grace > m_asked_at + m_limit) {
        return false;
    }
    const unsigned long long waited = m_steps.cpu_waited();
    const unsigned long long quarter_ns =
        static_cast<unsigned long long>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(m_grace).count()) /
        4;
    const bool starved = waited >= m_waited + quarter_ns;
    m_waited = waited;
    return starved;
}

void stop_escalation::terminate() {
    m_steps.signal(SIGTERM);
    m_timer.start(m_grace, [this] {
        m_steps.ignored_term();
        m_steps.signal(SIGKILL);
    });
}

} // namespace kpool::daemon
