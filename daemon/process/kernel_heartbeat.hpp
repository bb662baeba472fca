// The health watch of a warm, unleased kernel: a kernel_info_request every interval, and a
// report when one is not answered within the timeout. The kernel_process sends the beats (over
// its shell channel) and decides what a miss means; this holds the timing and the beat in flight.
#pragma once

#include "loop/uv_timer.hpp"

#include <chrono>
#include <functional>
#include <string>

namespace kpool::daemon {

class kernel_heartbeat {
public:
    struct callbacks {
        // Sends one beat; false if it could not be sent this time (it is tried again next
        // interval). The kernel_process calls answered() when the reply comes.
        std::function<bool()> send_beat;
        // No answer within the timeout; the watch has stopped. May destroy the kernel.
        std::function<void(const std::string& reason)> missed;
    };

    kernel_heartbeat(uv_loop_t* loop, std::chrono::milliseconds interval,
                     std::chrono::milliseconds timeout, callbacks cb);

    // Starts beating (an interval of 0 never beats); stop() ends it, a beat in flight forgotten.
    void start();
    void stop();
    // The beat in flight was answered; false if none was (a late answer after stop()).
    bool answered();

private:
    void beat();

    std::chrono::milliseconds m_interval;
    std::chrono::milliseconds m_timeout;
    callbacks m_cb;
    bool m_in_flight = false;
    loop::uv_timer m_next;     // the next beat
    loop::uv_timer m_deadline; // the beat in flight must be answered by then
};

} // namespace kpool::daemon
