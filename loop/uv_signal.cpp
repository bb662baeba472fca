// uv_signal: the trampoline from libuv's C callback, exceptions caught here.
#include "loop/uv_signal.hpp"

#include "loop/logging.hpp"

#include <stdexcept>

namespace kpool::loop {

uv_signal::uv_signal(uv_loop_t* loop, int signum, std::function<void(int)> callback) {
    auto state = std::make_unique<handle_state>();
    if (int rc = uv_signal_init(loop, &state->handle); rc != 0) {
        throw std::runtime_error(std::string("uv_signal_init: ") + uv_strerror(rc));
    }
    state->handle.data = state.get();
    state->callback = std::move(callback);
    m_state.reset(state.release());
    if (int rc = uv_signal_start(
            &m_state->handle,
            [](uv_signal_t* h, int sig) {
                auto* s = static_cast<handle_state*>(h->data);
                auto fire = s->callback; // the callback may destroy this watcher
                try {
                    fire(sig);
                } catch (const std::exception& e) {
                    logger("daemon")->error("signal callback failed: {}", e.what());
                }
            },
            signum);
        rc != 0) {
        throw std::runtime_error(std::string("uv_signal_start: ") + uv_strerror(rc));
    }
}

} // namespace kpool::loop
