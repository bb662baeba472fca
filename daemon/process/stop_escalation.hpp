// How a kernel is made to stop: a shutdown_request on its control channel when its channels are
// known, then SIGTERM to its process group after the grace, then SIGKILL after another; without
// known channels, SIGTERM at once. A kernel whose teardown was left to idle CPU gets normal CPU
// and one more grace before SIGTERM: on a host with no idle CPU it could not have used the first,
// and a kill would skip its atexit functions and history flush. A kernel that spent a quarter of
// a grace or more waiting for a CPU was starved by a busy host: it gets another grace, up to
// `starved_limit` after the request. One that slept (hung) or ran freely (busy on an idle host:
// a runaway loop is no reason to wait) gets SIGTERM on schedule. The kernel_process sends and
// changes priorities; this keeps the schedule.
#pragma once

#include "loop/uv_timer.hpp"

#include <chrono>
#include <functional>

namespace kpool::daemon {

class stop_escalation {
public:
    // How long a kernel kept waiting for a CPU after its shutdown_request may take in all.
    static constexpr std::chrono::seconds starved_limit{30};

    struct steps {
        std::function<void()> ask; // the shutdown_request
        // The grace after `ask` is over: true if the kernel was at idle CPU priority and now
        // has normal, so that it gets another grace before SIGTERM. Optional.
        std::function<bool()> hurry;
        std::function<void(int signum)> signal; // to the process group
        std::function<void()> ignored_term;     // SIGKILL follows (for the log)
        // Nanoseconds the kernel has waited, runnable, for a CPU so far. Optional.
        std::function<unsigned long long()> cpu_waited;
        // Another grace for a starved kernel, so many seconds after the request (log).
        std::function<void(double seconds)> starved;
    };

    stop_escalation(uv_loop_t* loop, std::chrono::milliseconds grace, steps s,
                    std::chrono::milliseconds limit = starved_limit);

    void begin(bool ask_first);
    // The process is gone: nothing more to send.
    void cancel() { m_timer.stop(); }

private:
    void asked_grace_over();
    void grace_over();
    bool was_starved();
    void terminate();

    std::chrono::milliseconds m_grace;
    std::chrono::milliseconds m_limit;
    steps m_steps;
    loop::uv_timer m_timer;
    std::chrono::steady_clock::time_point m_asked_at;
    unsigned long long m_waited = 0; // cpu_waited at the last grace's start
};

} // namespace kpool::daemon
