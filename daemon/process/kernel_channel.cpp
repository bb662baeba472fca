// kernel_channel: requests out on a DEALER, replies routed to their continuations.
#include "daemon/process/kernel_channel.hpp"

#include "loop/logging.hpp"
#include "loop/zmq_frames.hpp"
#include "loop/zmq_watcher.hpp"

namespace kpool::daemon {

kernel_channel::kernel_channel(uv_loop_t* loop, zmq::context_t& zmq, std::string name)
    : m_loop(loop), m_zmq(zmq), m_name(std::move(name)) {}

kernel_channel::~kernel_channel() { close(); }

void kernel_channel::open(const std::string& endpoint, const std::string& key,
                          const std::string& session) {
    if (m_socket) {
        return;
    }
    auto socket = std::make_unique<zmq::socket_t>(m_zmq, zmq::socket_type::dealer);
    socket->set(zmq::sockopt::linger, 0);
    socket->set(zmq::sockopt::reconnect_ivl, 20); // ipc sockets appear a moment after launch
    socket->connect(endpoint);
    m_key = key;
    m_session = session;
    m_socket = std::move(socket);
    m_watcher = std::make_unique<loop::zmq_watcher>(m_loop, *m_socket, [this] { on_readable(); });
}

std::string kernel_channel::send(std::string_view msg_type, nlohmann::json content,
                                 on_reply reply) {
    auto msg = protocol::make_message(msg_type, m_session, std::move(content));
    loop::send_frames(*m_socket, protocol::serialize(msg, m_key));
    if (reply) {
        m_waiting.emplace(msg.msg_id(), std::move(reply));
    }
    return msg.msg_id();
}

void kernel_channel::close() {
    // May run inside the watcher's own callback: the watcher is built for that.
    m_watcher.reset();
    m_socket.reset();
    m_waiting.clear();
}

void kernel_channel::on_readable() {
    auto frames = loop::recv_frames(*m_socket);
    if (!frames) {
        return;
    }
    auto msg = protocol::parse(*frames, m_key);
    if (!msg) {
        loop::logger("kernel")->warn("{} sent a bad message: {}", m_name, msg.err().message);
        return;
    }
    auto it = m_waiting.find(msg->parent_msg_id());
    if (it == m_waiting.end()) {
        return;
    }
    auto reply = std::move(it->second);
    m_waiting.erase(it);
    reply(*msg); // may close this channel, or stop the kernel: nothing of ours is used after
}

} // namespace kpool::daemon
