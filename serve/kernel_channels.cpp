// kernel_channels: sockets to one kernel, signing and checking, and the readiness handshake.
#include "serve/kernel_channels.hpp"

#include "loop/zmq_frames.hpp"
#include "protocol/hmac.hpp"
#include "protocol/wire.hpp"

#include <algorithm>

namespace kpool::serve {

using json = nlohmann::json;
using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

std::string_view port_name(kernel_port port) {
    switch (port) {
    case kernel_port::shell: return "shell";
    case kernel_port::control: return "control";
    case kernel_port::stdin_port: return "stdin";
    case kernel_port::iopub: return "iopub";
    }
    return "shell";
}

kernel_channels::kernel_channels(uv_loop_t* loop, zmq::context_t& zmq,
                                 const protocol::connection_info& info, bool all_ports,
                                 on_message_fn on_message)
    : m_key(info.key), m_session(protocol::random_hex(16)), m_on_message(std::move(on_message)),
      m_timer(loop) {
    const auto open = [&](kernel_port port, zmq::socket_type type, std::uint16_t number) {
        auto s = std::make_unique<zmq::socket_t>(zmq, type);
        s->set(zmq::sockopt::linger, 0);
        if (type == zmq::socket_type::sub) {
            s->set(zmq::sockopt::subscribe, "");
        } else {
            // One routing id for shell, control and stdin, as jupyter_client gives them the
            // session's: ipykernel sends an input_request (input(), getpass, pdb) on its stdin
            // ROUTER to the identity of the shell request's sender, so with two different ids
            // it went to nobody and the kernel waited for ever.
            s->set(zmq::sockopt::routing_id, m_session);
        }
        s->connect(info.endpoint(number));
        const auto at = static_cast<std::size_t>(port);
        m_sockets[at] = std::move(s);
        m_watchers[at] = std::make_unique<loop::zmq_watcher>(loop, *m_sockets[at],
                                                             [this, port] { on_readable(port); });
    };
    open(kernel_port::shell, zmq::socket_type::dealer, info.shell_port);
    open(kernel_port::iopub, zmq::socket_type::sub, info.iopub_port);
    if (all_ports) {
        open(kernel_port::control, zmq::socket_type::dealer, info.control_port);
        open(kernel_port::stdin_port, zmq::socket_type::dealer, info.stdin_port);
    }
}

kernel_channels::~kernel_channels() {
    for (auto& w : m_watchers) {
        w.reset();
    }
}

zmq::socket_t* kernel_channels::socket(kernel_port port) {
    return m_sockets[static_cast<std::size_t>(port)].get();
}

std::string kernel_channels::send(kernel_port to, std::string_view msg_type, const json& content) {
    auto msg = protocol::make_message(msg_type, m_session, content);
    if (zmq::socket_t* s = socket(to)) {
        loop::try_send_frames(*s, protocol::serialize(msg, m_key));
    }
    return msg.msg_id();
}

bool kernel_channels::send_parts(kernel_port to, const std::vector<std::string>& parts) {
    zmq::socket_t* s = socket(to);
    if (s == nullptr || to == kernel_port::iopub || parts.size() < 4) {
        return false;
    }
    std::vector<std::string> frames;
    frames.reserve(parts.size() + 2);
    frames.emplace_back(protocol::wire_delimiter);
    frames.push_back(protocol::hmac_sha256_hex(m_key, {parts[0], parts[1], parts[2], parts[3]}));
    frames.insert(frames.end(), parts.begin(), parts.end());
    return loop::try_send_frames(*s, frames) == loop::send_result::sent;
}

void kernel_channels::when_ready(std::chrono::milliseconds timeout,
                                 std::function<void(result<json>)> done) {
    handshake(timeout, std::move(done), true);
}

void kernel_channels::when_subscribed(std::chrono::milliseconds timeout,
                                      std::function<void(result<json>)> done) {
    handshake(timeout, std::move(done), false);
}

void kernel_channels::handshake(std::chrono::milliseconds timeout,
                                std::function<void(result<json>)> done, bool reply_needed) {
    m_reply_needed = reply_needed;
    m_ready_done = std::move(done);
    m_ready_deadline = clock::now() + timeout;
    ready_round();
}

void kernel_channels::ready_round() {
    if (clock::now() >= m_ready_deadline) {
        auto done = std::move(m_ready_done);
        m_ready_done = nullptr;
        done(error{errc::timeout, "the kernel did not answer kernel_info in time"});
        return;
    }
    m_ready_reply = m_ready_iopub = false;
    m_ready_id = send(kernel_port::shell, "kernel_info_request", json::object());
    if (m_handshake_ids.size() < 64) {
        m_handshake_ids.push_back(m_ready_id);
    }
    m_timer.start(1000ms, [this] { ready_round(); }); // no answer: ask again
}

void kernel_channels::on_readable(kernel_port from) {
    auto frames = loop::recv_frames(*socket(from));
    if (!frames) {
        return;
    }
    const auto delim = std::find(frames->begin(), frames->end(), protocol::wire_delimiter);
    if (frames->end() - delim < 6) {
        return;
    }
    const std::string& signature = delim[1];
    if (!m_key.empty() && !protocol::signatures_equal(
                              signature, protocol::hmac_sha256_hex(
                                             m_key, {delim[2], delim[3], delim[4], delim[5]}))) {
        return; // a bad signature is dropped, as jupyter_client drops it
    }
    message_parts parts{std::vector<std::string>(std::make_move_iterator(delim + 2),
                                                 std::make_move_iterator(frames->end()))};
    // Only a message answering a handshake request can be one: a cheap test before parsing.
    const bool maybe_handshake =
        std::any_of(m_handshake_ids.begin(), m_handshake_ids.end(), [&](const std::string& id) {
            return parts.parent_header().find(id) != std::string::npos;
        });
    if (maybe_handshake) {
        const json parent = json::parse(parts.parent_header(), nullptr, false);
        const std::string parent_id = parent.is_object() ? parent.value("msg_id", "") : "";
        if (!m_ready_done || parent_id != m_ready_id) {
            if (std::find(m_handshake_ids.begin(), m_handshake_ids.end(), parent_id) !=
                m_handshake_ids.end()) {
                // A late answer to an earlier round, or after the handshake ended: kept only
                // when it is the reply when_subscribed did not wait for.
                if (from == kernel_port::shell && parent_id == m_ready_id &&
                    m_ready_info.is_null()) {
                    const json header = json::parse(parts.header(), nullptr, false);
                    if (header.is_object() && header.value("msg_type", "") == "kernel_info_reply") {
                        m_ready_info = json::parse(parts.frames[3], nullptr, false);
                    }
                }
                return;
            }
        } else {
            const json header = json::parse(parts.header(), nullptr, false);
            if (from == kernel_port::iopub) {
                m_ready_iopub = true;
            } else if (header.is_object() && header.value("msg_type", "") == "kernel_info_reply") {
                m_ready_reply = true;
                m_ready_info = json::parse(parts.frames[3], nullptr, false);
                if (!m_ready_iopub) {
                    // Its status follows at once unless our SUB was not subscribed yet when the
                    // kernel sent it (a SUB joins a few milliseconds late): then ask again soon,
                    // not after the 200 ms a blocking client waits, since a request waits on this
                    // (a round costs the kernel well under a millisecond).
                    m_timer.start(5ms, [this] { ready_round(); });
                }
            }
            if (m_ready_iopub && (m_ready_reply || !m_reply_needed)) {
                m_timer.stop();
                auto done = std::move(m_ready_done);
                m_ready_done = nullptr;
                done(m_ready_info);
            }
            return;
        }
    }
    if (m_on_message) {
        m_on_message(from, std::move(parts)); // last: may destroy this object's owner's state
    }
}

} // namespace kpool::serve
