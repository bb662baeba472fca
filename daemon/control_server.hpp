// The control socket: a ZeroMQ ROUTER bound to the configured endpoint, speaking protocol v1.
//
// It owns framing: a request is [routing ids..., "", json] (a REQ client adds the empty
// delimiter itself, a DEALER sends it). Framing mistakes are answered here with bad_request;
// well-framed requests go to the handler with the envelope to answer on. Every request gets
// exactly one reply: the handler answers at once or keeps the envelope and answers later.
#pragma once

#include "daemon/zmq_watcher.hpp"

#include <uv.h>
#include <zmq.hpp>

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kpool::daemon {

// Routing frames of one request, up to and including the empty delimiter.
struct envelope {
    std::vector<std::string> frames;
};

// How the control socket is guarded beyond file permissions (see access_policy.hpp).
struct control_security {
    bool ask_zap = false;         // every connection is put to the ZAP handler
    std::string curve_secret_key; // 32 bytes: the socket is a CURVE server
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

    // Sends a reply without blocking. False if the client is gone or not reading (then nobody
    // saw the reply, which matters for acquire).
    bool reply(const envelope& env, const std::string& body);

    const std::string& endpoint() const { return m_endpoint; }

private:
    void on_readable();

    std::string m_endpoint;
    handler m_on_request;
    zmq::socket_t m_socket;
    std::unique_ptr<zmq_watcher> m_watcher;
};

} // namespace kpool::daemon
