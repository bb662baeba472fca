// kernel_session: the wire protocol of one execution at a time, from libuv callbacks.
#include "serve/kernel_session.hpp"

#include "daemon/loop/zmq_frames.hpp"
#include "protocol/hmac.hpp"
#include "protocol/wire.hpp"

namespace kpool::serve {

using json = nlohmann::json;
using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

kernel_session::kernel_session(uv_loop_t* loop, zmq::context_t& zmq, const protocol::connection_info& info)
    : m_loop(loop), m_key(info.key), m_session(protocol::random_hex(16)),
      m_shell(zmq, zmq::socket_type::dealer), m_iopub(zmq, zmq::socket_type::sub), m_timer(loop) {
    for (zmq::socket_t* s : {&m_shell, &m_iopub}) {
        s->set(zmq::sockopt::linger, 0);
    }
    m_iopub.set(zmq::sockopt::subscribe, "");
    m_shell.connect(info.endpoint(info.shell_port));
    m_iopub.connect(info.endpoint(info.iopub_port));
    m_shell_watcher = std::make_unique<daemon::zmq_watcher>(
        loop, m_shell, [this] { on_message(jupyter::channel::shell, m_shell); });
    m_iopub_watcher = std::make_unique<daemon::zmq_watcher>(
        loop, m_iopub, [this] { on_message(jupyter::channel::iopub, m_iopub); });
}

kernel_session::~kernel_session() {
    m_shell_watcher.reset();
    m_iopub_watcher.reset();
}

void kernel_session::send(zmq::socket_t& socket, const std::string& msg_type, json content,
                          std::string* msg_id) {
    auto msg = protocol::make_message(msg_type, m_session, std::move(content));
    if (msg_id != nullptr) {
        *msg_id = msg.msg_id();
    }
    const auto frames = protocol::serialize(msg, m_key);
    for (std::size_t i = 0; i < frames.size(); ++i) {
        socket.send(zmq::buffer(frames[i]),
                    (i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none) |
                        zmq::send_flags::dontwait);
    }
}

void kernel_session::when_ready(std::chrono::milliseconds timeout,
                                std::function<void(result<json>)> done) {
    m_ready_done = std::move(done);
    m_ready_deadline = clock::now() + timeout;
    ready_round();
}

void kernel_session::ready_round() {
    if (clock::now() >= m_ready_deadline) {
        auto done = std::move(m_ready_done);
        m_ready_done = nullptr;
        done(error{errc::timeout, "the kernel did not answer kernel_info in time"});
        return;
    }
    m_ready_reply = m_ready_iopub = false;
    send(m_shell, "kernel_info_request", json::object(), &m_ready_id);
    m_timer.start(1000ms, [this] { ready_round(); }); // no answer: ask again
}

void kernel_session::execute(const jupyter::execute_request& request, execute_callbacks callbacks) {
    m_callbacks = std::move(callbacks);
    m_cancel = false;
    std::string id;
    send(m_shell, "execute_request", jupyter::execute_request_content(request), &id);
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

void kernel_session::on_message(jupyter::channel from, zmq::socket_t& socket) {
    auto frames = daemon::recv_frames(socket);
    if (!frames) {
        return;
    }
    auto parsed = protocol::parse(*frames, m_key);
    if (!parsed) {
        return; // a bad signature is dropped, as jupyter_client drops it
    }
    jupyter::incoming in{from, std::move(parsed).value()};
    if (m_ready_done && in.msg.parent_msg_id() == m_ready_id) {
        if (from == jupyter::channel::iopub) {
            m_ready_iopub = true;
        } else if (in.msg.msg_type() == "kernel_info_reply") {
            m_ready_reply = true;
            m_ready_info = in.msg.content;
            if (!m_ready_iopub) {
                // Its status follows at once unless our SUB was not subscribed yet when the kernel
                // sent it (a SUB joins a few milliseconds late): then ask again soon, not after
                // the 200 ms a blocking client waits, since a request waits on this.
                m_timer.start(20ms, [this] { ready_round(); });
            }
        }
        if (m_ready_reply && m_ready_iopub) {
            m_timer.stop();
            auto done = std::move(m_ready_done);
            m_ready_done = nullptr;
            done(m_ready_info);
        }
        return;
    }
    if (!m_tracker) {
        return;
    }
    if (m_tracker->on_message(in, clock::now()) && from == jupyter::channel::iopub &&
        m_callbacks.on_iopub) {
        m_callbacks.on_iopub(in.msg);
    }
    finish_if_done();
}

} // namespace kpool::serve
