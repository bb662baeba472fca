// stop_escalation: ask, (hurry,) then SIGTERM, then SIGKILL, a grace apart.
#include "daemon/process/stop_escalation.hpp"

#include <csignal>

namespace kpool::daemon {

stop_escalation::stop_escalation(uv_loop_t* loop, std::chrono::milliseconds grace, steps s)
    : m_grace(grace), m_steps(std::move(s)), m_timer(loop) {}

void stop_escalation::begin(bool ask_first) {
    if (!ask_first) {
        terminate();
        return;
    }
    m_steps.ask();
    m_timer.start(m_grace, [this] { asked_grace_over(); });
}

void stop_escalation::asked_grace_over() {
    if (m_steps.hurry && m_steps.hurry()) {
        m_timer.start(m_grace, [this] { terminate(); });
        return;
    }
    terminate();
}

void stop_escalation::terminate() {
    m_steps.signal(SIGTERM);
    m_timer.start(m_grace, [this] {
        m_steps.ignored_term();
        m_steps.signal(SIGKILL);
    });
}

} // namespace kpool::daemon
