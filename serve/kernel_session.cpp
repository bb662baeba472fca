// kernel_session: the wire protocol of one execution at a time, from libuv callbacks.
#include "serve/kernel_session.hpp"

#include "protocol/wire.hpp"

namespace kpool::serve {

using json = nlohmann::json;
using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

kernel_session::kernel_session(uv_loop_t* loop, zmq::context_t& zmq, const protocol::connection_info& info)
    : kernel_session(loop, std::make_unique<kernel_channels>(loop, zmq, info, false, nullptr)) {}

kernel_session::kernel_session(uv_loop_t* loop, std::unique_ptr<kernel_channels> channels)
    : m_channels(std::move(channels)), m_timer(loop) {
    m_channels->set_on_message([this](kernel_port from, message_parts parts) { on_message(from, std::move(parts)); });
}

kernel_session::~kernel_session() = default;

void kernel_session::when_subscribed(std::chrono::milliseconds timeout, std::function<void(result<json>)> done) {
    m_channels->when_subscribed(timeout, std::move(done));
}

void kernel_session::execute(const jupyter::execute_request& request, execute_callbacks callbacks) {
    m_callbacks = std::move(callbacks);
    m_cancel = false;
    const std::string id =
        m_channels->send(kernel_port::shell, "execute_request", jupyter::execute_request_content(request));
    m_tracker.emplace(id, request.timeout, clock::now());
    arm();
}

void kernel_session::kernel_died() {
    if (m_tracker) {
        m_tracker->kernel_died();
        finish_if_done(); // last: may destroy this session
    }
}

void kernel_session::cancel() {
    if (m_tracker) {
        m_cancel = true;
        tick();
    }
}

void kernel_session::arm() {
    if (!m_tracker) {
        return;
    }
    // Woken at the tracker's next deadline, and every second besides (a cancel, a limit).
    auto wake = clock::now() + 1000ms;
    if (auto d = m_tracker->next_deadline(); d && *d < wake) {
        wake = *d;
    }
    const auto delay = std::max(0ms, std::chrono::ceil<std::chrono::milliseconds>(wake - clock::now()));
    m_timer.start(delay, [this] { tick(); });
}

void kernel_session::tick() {
    if (!m_tracker) {
        return;
    }
    if (m_tracker->on_tick(clock::now(), m_cancel) && m_callbacks.interrupt) {
        m_callbacks.interrupt();
    }
    if (!finish_if_done()) {
        arm();
    }
}

bool kernel_session::finish_if_done() {
    if (!m_tracker || !m_tracker->finished(clock::now())) {
        return false;
    }
    const jupyter::execution result = m_tracker->result();
    m_tracker.reset();
    m_timer.stop();
    auto callbacks = std::move(m_callbacks);
    m_callbacks = {};
    if (callbacks.done) {
        callbacks.done(result); // may destroy this session
    }
    return true;
}

void kernel_session::on_message(kernel_port from, message_parts parts) {
    if (!m_tracker || from == kernel_port::control || from == kernel_port::stdin_port) {
        return;
    }
    // protocol::parse reads the parts as every client does; kernel_channels checked the signature.
    std::vector<std::string> frames{std::string(protocol::wire_delimiter), std::string()};
    frames.insert(frames.end(), std::make_move_iterator(parts.frames.begin()), std::make_move_iterator(parts.frames.end()));
    auto msg = protocol::parse(frames, "");
    if (!msg) {
        return;
    }
    const auto channel = from == kernel_port::iopub ? jupyter::channel::iopub : jupyter::channel::shell;
    jupyter::incoming in{channel, std::move(msg).value()};
    if (m_tracker->on_message(in, clock::now()) && channel == jupyter::channel::iopub && m_callbacks.on_iopub) {
        m_callbacks.on_iopub(in.msg);
    }
    finish_if_done();
}

} // namespace kpool::serve
