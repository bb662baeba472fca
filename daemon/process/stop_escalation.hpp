// How a kernel is made to stop: a shutdown_request on its control channel when its channels are
// known, then SIGTERM to its process group after the grace, then SIGKILL after another; without
// known channels, SIGTERM at once. The kernel_process sends; this keeps the schedule.
#pragma once

#include "daemon/loop/uv_timer.hpp"

#include <chrono>
#include <functional>

namespace kpool::daemon {

class stop_escalation {
public:
    struct steps {
        std::function<void()> ask;               // the shutdown_request
        std::function<void(int signum)> signal;  // to the process group
        std::function<void()> ignored_term;      // SIGKILL follows (for the log)
    };

    stop_escalation(uv_loop_t* loop, std::chrono::milliseconds grace, steps s);

    void begin(bool ask_first);
    // The process is gone: nothing more to send.
    void cancel() { m_timer.stop(); }

private:
    void terminate();

    std::chrono::milliseconds m_grace;
    steps m_steps;
    uv_timer m_timer;
};

} // namespace kpool::daemon
