// The control socket: a ZeroMQ ROUTER bound to the configured endpoint, speaking protocol v1.
//
// It owns framing: a request is [routing ids..., "", json] (a REQ client adds the empty
// delimiter itself, a DEALER sends it). Framing mistakes are answered here with bad_request;
// well-framed requests go to the handler with the envelope to answer on. Every request gets
// exactly one reply: the handler answers at once or keeps the envelope and answers later.
#pragma once

#include "loop/uv_timer.hpp"
#include "loop/zmq_watcher.hpp"

#include <uv.h>
#include <zmq.hpp>

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kpool::daemon {

// Routing frames of one request, up to and including the empty delimiter.
struct envelope {
    std::vector<std::string> frames;
};

// How the control socket is guarded beyond file permissions (see access_policy.hpp).
struct control_security {
    bool ask_zap = false;               // every connection is put to the ZAP handler
    std::string curve_secret_key;       // 32 bytes: the socket is a CURVE server
    bool ipc_world_connectable = false; // socket file 0666: ZAP decides who gets in
};

class control_server {
public:
    using handler = std::function<void(const envelope&, std::string_view body)>;

    // Binds at once (throws zmq::error_t if it cannot). An ipc socket file is created with
    // mode 0600 (0666 with ipc_world_connectable) inside the runtime directory.
    control_server(uv_loop_t* loop, zmq::context_t& zmq, std::string endpoint,
                   const control_security& security, handler on_request);
    ~control_server();
    control_server(const control_server&) = delete;
    control_server& operator=(const control_server&) = delete;

    // Sends a reply without blocking, or queues it behind the client's earlier replies when the
    // client reads slower than it asks (its pipe is full): no answer is lost to a slow reader.
    // False only if the client is gone (then nobody saw the reply, which matters for acquire).
    bool reply(const envelope& env, const std::string& body);

    // Per client, what may wait for it to read; past either bound its queue is dropped with one
    // log line (like redis' client output buffer limit), so a client that never reads cannot
    // grow the daemon's memory without bound.
    static constexpr std::size_t max_queued_replies = 100000;
    static constexpr std::size_t max_queued_bytes = 16 * 1024 * 1024;

    const std::string& endpoint() const { return m_endpoint; }

private:
    struct backlog {
        std::deque<std::vector<std::string>> replies; // whole messages, routing id first
        std::size_t bytes = 0;
    };

    void on_readable();
    // Sends what the clients' queues hold, in order, until each is empty or blocks again.
    void flush();

    std::string m_endpoint;
    handler m_on_request;
    zmq::socket_t m_socket;
    std::unique_ptr<loop::zmq_watcher> m_watcher;
    std::unordered_map<std::string, backlog> m_backlog; // by routing id
    // ZeroMQ says when some pipe has room, never which: queued replies are retried every few
    // milliseconds (and at every wake-up of the socket) while any wait.
    std::unique_ptr<loop::uv_timer> m_flush_timer;
    std::chrono::milliseconds m_flush_delay{1}; // doubles while nothing moves
};

} // namespace kpool::daemon
