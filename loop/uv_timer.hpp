// A libuv timer with a std::function callback, closed when the object goes away.
#pragma once

#include "loop/uv_handle.hpp"

#include <chrono>
#include <functional>

namespace kpool::loop {

class uv_timer {
public:
    explicit uv_timer(uv_loop_t* loop);

    // Fires once after `delay` (and every `repeat` after that, when non-zero). Restarts if armed.
    void start(std::chrono::milliseconds delay, std::function<void()> callback,
               std::chrono::milliseconds repeat = std::chrono::milliseconds{0});
    void stop();
    bool active() const;

    // Lets the loop exit while this timer is armed (for housekeeping timers).
    void unref();

private:
    struct handle_state {
        uv_timer_t handle; // first member: uv_close_deleter relies on it
        std::function<void()> callback;
    };
    uv_ptr<handle_state> m_state;
};

} // namespace kpool::loop
