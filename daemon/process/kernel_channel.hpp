// One of a kernel's request channels (shell or control) as kpoold uses it: a DEALER connected on
// demand, requests signed with the kernel's key, and each reply routed by its parent msg_id to
// the continuation given with the request. Replies nobody waits for (a probe answered late, a
// shutdown_reply) are read and dropped, never left queued; bad signatures are logged.
#pragma once

#include "protocol/wire.hpp"

#include <nlohmann/json.hpp>
#include <uv.h>
#include <zmq.hpp>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

namespace kpool::loop {
class zmq_watcher;
} // namespace kpool::loop

namespace kpool::daemon {

class kernel_channel {
public:
    using on_reply = std::function<void(const protocol::wire_message&)>;

    // `name` says whose channel in logs ("kernel ID shell").
    kernel_channel(uv_loop_t* loop, zmq::context_t& zmq, std::string name);
    ~kernel_channel();
    kernel_channel(const kernel_channel&) = delete;
    kernel_channel& operator=(const kernel_channel&) = delete;

    // Connects, unless connected. Throws zmq::error_t (out of file descriptors, most likely).
    void open(const std::string& endpoint, const std::string& key, const std::string& session);
    bool is_open() const { return m_socket != nullptr; }
    // Sends a request (open first); its reply goes to `reply`, or nowhere. Returns its msg_id.
    std::string send(std::string_view msg_type, nlohmann::json content = nlohmann::json::object(),
                     on_reply reply = nullptr);
    // Disconnects; continuations are dropped unanswered. Safe inside a continuation.
    void close();

private:
    void on_readable();

    uv_loop_t* m_loop;
    zmq::context_t& m_zmq;
    std::string m_name;
    std::string m_key;
    std::string m_session;
    // The socket before its watcher: a watcher must be destroyed before its socket.
    std::unique_ptr<zmq::socket_t> m_socket;
    std::unique_ptr<loop::zmq_watcher> m_watcher;
    std::map<std::string, on_reply> m_waiting; // by the request's msg_id
};

} // namespace kpool::daemon
