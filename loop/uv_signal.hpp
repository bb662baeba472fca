// A libuv signal watcher with a std::function callback, closed when the object goes away: the
// same idiom as uv_timer (the handle first in a heap struct owned by a uv_ptr).
#pragma once

#include "loop/uv_handle.hpp"

#include <functional>

namespace kpool::loop {

class uv_signal {
public:
    // Watches `signum` from now on; `callback` runs on the loop.
    uv_signal(uv_loop_t* loop, int signum, std::function<void(int)> callback);

private:
    struct handle_state {
        uv_signal_t handle; // first member: uv_close_deleter relies on it
        std::function<void(int)> callback;
    };
    uv_ptr<handle_state> m_state;
};

} // namespace kpool::loop
