// uv_timer: trampolines from libuv's C callback into a std::function, exceptions caught here.
#include "loop/uv_timer.hpp"

#include "loop/logging.hpp"

#include <stdexcept>

namespace kpool::loop {

uv_timer::uv_timer(uv_loop_t* loop) {
    auto state = std::make_unique<handle_state>();
    if (int rc = uv_timer_init(loop, &state->handle); rc != 0) {
        throw std::runtime_error(std::string("uv_timer_init: ") + uv_strerror(rc));
    }
    state->handle.data = state.get();
    m_state.reset(state.release());
}

void uv_timer::start(std::chrono::milliseconds delay, std::function<void()> callback,
                     std::chrono::milliseconds repeat) {
    m_state->callback = std::move(callback);
    uv_timer_start(
        &m_state->handle,
        [](uv_timer_t* h) {
            auto* state = static_cast<handle_state*>(h->data);
            // Copy: the callback may re-arm this timer (replacing the function) or destroy it.
            auto fire = state->callback;
            try {
                fire();
            } catch (const std::exception& e) {
                logger("daemon")->error("timer callback failed: {}", e.what());
            }
        },
        static_cast<std::uint64_t>(std::max<std::int64_t>(delay.count(), 0)),
        static_cast<std::uint64_t>(std::max<std::int64_t>(repeat.count(), 0)));
}

void uv_timer::stop() { uv_timer_stop(&m_state->handle); }

bool uv_timer::active() const {
    return uv_is_active(reinterpret_cast<const uv_handle_t*>(&m_state->handle)) != 0;
}

void uv_timer::unref() { uv_unref(reinterpret_cast<uv_handle_t*>(&m_state->handle)); }

} // namespace kpool::loop
