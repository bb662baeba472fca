// control_channel: kpoold requests and replies over a DEALER socket watched by the loop.
#include "serve/control_channel.hpp"

#include "protocol/control_replies.hpp"
#include "protocol/control_requests.hpp"

#include "loop/zmq_frames.hpp"

#include <sys/stat.h>

#include <vector>

namespace kpool::serve {

using json = nlohmann::json;

control_channel::control_channel(uv_loop_t* loop, zmq::context_t& zmq, std::string endpoint,
                                 client::curve_keys keys)
    : m_loop(loop), m_zmq(zmq), m_endpoint(std::move(endpoint)), m_keys(std::move(keys)) {
    connect();
}

// Requests still pending are dropped unanswered: their owners are being destroyed too (kpool
// serve stops only once no request is in flight), and calling back into them would not be safe.
control_channel::~control_channel() = default;

void control_channel::connect() {
    m_socket = zmq::socket_t(m_zmq, zmq::socket_type::dealer);
    m_socket.set(zmq::sockopt::linger, 0);
    if (!m_keys.empty()) {
        m_socket.set(zmq::sockopt::curve_serverkey, m_keys.server_public);
        m_socket.set(zmq::sockopt::curve_publickey, m_keys.client_public);
        m_socket.set(zmq::sockopt::curve_secretkey, m_keys.client_secret);
    }
    m_socket.set(zmq::sockopt::connect_timeout, static_cast<int>(client::connect_timeout.count()));
    m_socket.set(zmq::sockopt::heartbeat_ivl, static_cast<int>(client::heartbeat_interval.count()));
    m_socket.set(zmq::sockopt::heartbeat_timeout,
                 static_cast<int>(client::heartbeat_timeout.count()));
    m_monitor = std::make_unique<client::connection_monitor>(
        m_zmq, m_socket, client::lost_connection_events | ZMQ_EVENT_HANDSHAKE_SUCCEEDED);
    m_socket.connect(m_endpoint);
    m_watcher = std::make_unique<loop::zmq_watcher>(m_loop, m_socket, [this] { on_readable(); });
    m_monitor_watcher = std::make_unique<loop::zmq_watcher>(m_loop, m_monitor->socket(),
                                                            [this] { on_monitor_event(); });
}

void control_channel::on_monitor_event() {
    auto frames = loop::recv_frames(m_monitor->socket());
    if (!frames || frames->empty()) {
        return;
    }
    const std::uint16_t event = client::monitor_event_id(frames->front());
    if (event == ZMQ_EVENT_HANDSHAKE_SUCCEEDED) {
        m_lost.reset();
        return;
    }
    auto lost = client::lost_connection_error(event, m_endpoint);
    if (!lost) {
        return;
    }
    // No reply can come over a connection that is gone: every request on it fails now, and the
    // acquires among them are remembered as abandoned, so that a kernel granted over a
    // connection that comes back (a request libzmq still held) is released.
    m_lost = std::move(lost);
    std::vector<std::uint64_t> pending;
    for (const auto& [id, p] : m_pending) {
        pending.push_back(id);
    }
    for (const std::uint64_t id : pending) {
        give_up(id, *m_lost);
    }
}

void control_channel::request(json request, std::chrono::milliseconds timeout, reply_fn done) {
    const std::string ipc = "ipc://";
    if (m_endpoint.starts_with(ipc)) {
        struct stat st {};
        if (::stat(m_endpoint.substr(ipc.size()).c_str(), &st) != 0) {
            done(error{errc::unavailable, "cannot reach kpoold at " + m_endpoint +
                                              ": no socket there (is kpoold running?)"});
            return;
        }
    }
    if (m_lost) {
        done(*m_lost);
        return;
    }
    const std::uint64_t id = m_next_id++;
    request["req_id"] = id;
    const bool acquire = protocol::requests::op_of(request) == "acquire";
    const std::string body = request.dump();
    try {
        m_socket.send(zmq::message_t(), zmq::send_flags::sndmore | zmq::send_flags::dontwait);
        m_socket.send(zmq::buffer(body), zmq::send_flags::dontwait);
    } catch (const zmq::error_t& e) {
        done(error{errc::unavailable, "cannot send to kpoold at " + m_endpoint + ": " + e.what()});
        return;
    }
    auto deadline = std::make_unique<loop::uv_timer>(m_loop);
    deadline->start(timeout, [this, id, timeout] {
        give_up(id, error{errc::timeout, "no reply from kpoold at " + m_endpoint + " within " +
                                             std::to_string(timeout.count()) + " ms"});
    });
    m_pending.emplace(id, pending_request{std::move(done), std::move(deadline), acquire});
}

void control_channel::give_up(std::uint64_t id, error why) {
    auto it = m_pending.find(id);
    if (it == m_pending.end()) {
        return;
    }
    pending_request p = std::move(it->second);
    m_pending.erase(it);
    if (p.acquire) {
        m_abandoned_acquires.emplace(id, true);
        if (m_abandoned_acquires.size() > 4096) { // a daemon that never answers: forget the oldest
            m_abandoned_acquires.erase(m_abandoned_acquires.begin());
        }
    }
    p.done(std::move(why));
}

void control_channel::on_readable() {
    auto frames = loop::recv_frames(m_socket);
    if (!frames || frames->empty()) {
        return;
    }
    auto reply = json::parse(frames->back(), nullptr, false);
    if (reply.is_discarded() || !reply.is_object()) {
        return; // not kpoold's: nothing to match it to
    }
    on_reply(reply);
}

void control_channel::on_reply(const json& reply) {
    const json& req_id = reply.value("req_id", json());
    if (!req_id.is_number_unsigned()) {
        return;
    }
    const auto id = req_id.get<std::uint64_t>();
    auto it = m_pending.find(id);
    if (it == m_pending.end()) {
        if (m_abandoned_acquires.erase(id) > 0) {
            if (auto acquired = protocol::read_acquire_reply(reply)) {
                // Our caller gave up before this kernel came: nobody will use it.
                request(protocol::requests::release(acquired->kernel_id), std::chrono::seconds(5),
                        [](result<json>) {});
            }
        }
        return;
    }
    pending_request p = std::move(it->second);
    m_pending.erase(it);
    p.done(reply);
}

} // namespace kpool::serve
