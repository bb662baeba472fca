// How a kernel is made to stop: a shutdown_request on its control channel when its channels are
// known, then SIGTERM to its process group after the grace, then SIGKILL after another; without
// known channels, SIGTERM at once. A kernel whose teardown was left to idle CPU gets normal CPU
// and one more grace before SIGTERM: on a host with no idle CPU it could not have used the first,
// and a kill would skip its atexit functions and history flush. The kernel_process sends and
// changes priorities; this keeps the schedule.
#pragma once

#include "loop/uv_timer.hpp"

#include <chrono>
#include <functional>

namespace kpool::daemon {

class stop_escalation {
public:
    struct steps {
        std::function<void()> ask;               // the shutdown_request
        // The grace after `ask` is over: true if the kernel was at idle CPU priority and now
        // has normal, so that it gets another grace before SIGTERM. Optional.
        std::function<bool()> hurry;
        std::function<void(int signum)> signal;  // to the process group
        std::function<void()> ignored_term;      // SIGKILL follows (for the log)
    };

    stop_escalation(uv_loop_t* loop, std::chrono::milliseconds grace, steps s);

    void begin(bool ask_first);
    // The process is gone: nothing more to send.
    void cancel() { m_timer.stop(); }

private:
    void asked_grace_over();
    void terminate();

    std::chrono::milliseconds m_grace;
    steps m_steps;
    loop::uv_timer m_timer;
};

} // namespace kpool::daemon
