// The sockets kpool serve holds to one kernel, driven by the event loop: shell and iopub always,
// control and stdin when asked for (the gateway's websockets use all four). Messages go out
// signed with the kernel's key; each one that comes in, with a valid signature, is handed over
// as its frames. when_ready proves the kernel answers and that iopub is subscribed, so nothing
// sent after it can be missed.
#pragma once

#include "loop/uv_timer.hpp"
#include "loop/zmq_watcher.hpp"
#include "protocol/connection_info.hpp"
#include "protocol/result.hpp"

#include <nlohmann/json.hpp>
#include <uv.h>
#include <zmq.hpp>

#include <array>
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kpool::serve {

enum class kernel_port { shell, control, stdin_port, iopub };
// "shell", "control", "stdin", "iopub".
std::string_view port_name(kernel_port port);

// A message's frames after the delimiter and signature: header, parent_header, metadata,
// content (JSON text each), then buffers.
struct message_parts {
    std::vector<std::string> frames;
    const std::string& header() const { return frames[0]; }
    const std::string& parent_header() const { return frames[1]; }
};

class kernel_channels {
public:
    using on_message_fn = std::function<void(kernel_port from, message_parts parts)>;

    kernel_channels(uv_loop_t* loop, zmq::context_t& zmq, const protocol::connection_info& info,
                    bool all_ports, on_message_fn on_message);
    ~kernel_channels();
    kernel_channels(const kernel_channels&) = delete;
    kernel_channels& operator=(const kernel_channels&) = delete;

    // kernel_info round trips until one's iopub status arrives too. `done` once, with the
    // kernel_info_reply's content; meanwhile the messages of those round trips are not handed on.
    void when_ready(std::chrono::milliseconds timeout,
                    std::function<void(result<nlohmann::json>)> done);
    // The same rounds, but `done` (with null) as soon as a round's iopub message proves the
    // subscription, without waiting for its reply: a request sent then reaches the kernel
    // behind the kernel_info it is still answering (1-2 ms sooner on 2 cores). kernel_info()
    // holds the reply once it comes, which is before the reply to anything sent after.
    // Only a message that came proves the subscription. Tried and dropped: the first execute
    // sent once the SUB's ZMTP handshake had succeeded (libzmq's socket monitor), 3 ms sooner
    // per request: in 3 runs of 4 of test_serve's 50-request burst one request lost its first
    // messages (detected, it answered 502). A publisher takes in a new subscriber only when its
    // own thread processes commands, which (as we read libzmq) send() does at most about once a
    // millisecond, so a kernel publishing busy soon after its last message skips the newcomer.
    void when_subscribed(std::chrono::milliseconds timeout,
                         std::function<void(result<nlohmann::json>)> done);
    // The handshake's kernel_info_reply content; null until it comes.
    const nlohmann::json& kernel_info() const { return m_ready_info; }

    void set_on_message(on_message_fn on_message) { m_on_message = std::move(on_message); }

    // A new message of our own session; its msg_id.
    std::string send(kernel_port to, std::string_view msg_type, const nlohmann::json& content);
    // A message a client made (its four JSON parts and buffers), signed here. False when `to` is
    // iopub or a port this object does not hold, or the socket cannot take it now.
    bool send_parts(kernel_port to, const std::vector<std::string>& parts);

private:
    void on_readable(kernel_port from);
    void handshake(std::chrono::milliseconds timeout,
                   std::function<void(result<nlohmann::json>)> done, bool reply_needed);
    void ready_round();
    zmq::socket_t* socket(kernel_port port);

    std::string m_key;
    std::string m_session;
    std::array<std::unique_ptr<zmq::socket_t>, 4> m_sockets;
    std::array<std::unique_ptr<loop::zmq_watcher>, 4> m_watchers; // after m_sockets
    on_message_fn m_on_message;
    loop::uv_timer m_timer;

    std::function<void(result<nlohmann::json>)> m_ready_done;
    std::string m_ready_id;
    // Every handshake request's id: their late messages (a status after the reply) are ours too.
    std::vector<std::string> m_handshake_ids;
    nlohmann::json m_ready_info;
    bool m_ready_reply = false;
    bool m_ready_iopub = false;
    bool m_reply_needed = true; // when_ready; not when_subscribed
    std::chrono::steady_clock::time_point m_ready_deadline;
};

} // namespace kpool::serve
