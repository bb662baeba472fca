// A blocking Jupyter client for one running kernel, over protocol/'s wire code: shell and control
// DEALERs and an iopub SUB, as jupyter_client's BlockingKernelClient has them, for the `kpool`
// binary (`kpool exec`, `kpool run`). Single-threaded: the caller pumps messages with receive().
#pragma once

#include "protocol/connection_info.hpp"
#include "protocol/result.hpp"
#include "protocol/wire.hpp"

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace kpool::jupyter {

enum class channel { shell, iopub, control };

struct incoming {
    channel from;
    protocol::wire_message msg;
};

class kernel_client {
public:
    // Connects at once (ZeroMQ connects in the background).
    kernel_client(zmq::context_t& zmq, const protocol::connection_info& info);

    // Sends a request; returns its msg_id.
    std::string send(channel on, std::string_view msg_type, nlohmann::json content);

    // The next message on any channel within `timeout`, or nothing. Messages that fail the
    // signature check are dropped, as jupyter_client drops them.
    std::optional<incoming> receive(std::chrono::milliseconds timeout);

    // A kernel_info round trip whose iopub status also arrived: then iopub is subscribed and
    // no output of what follows can be missed (a SUB joins late; jupyter_client's
    // wait_for_ready does the same). Returns the kernel_info_reply's content.
    result<nlohmann::json> wait_until_ready(std::chrono::milliseconds timeout);

private:
    zmq::socket_t m_shell;
    zmq::socket_t m_control;
    zmq::socket_t m_iopub;
    std::string m_key;
    std::string m_session;
};

// What became of one execute_request.
struct execution {
    nlohmann::json reply;        // execute_reply content; null if none came
    nlohmann::json reply_header; // its header (the kernel's timestamp)
    bool timed_out = false;      // the time limit passed (the kernel was interrupted)
    bool kernel_died = false;    // the kernel went away before it answered
    bool cancelled = false;      // the caller gave up (the kernel was interrupted)
};

struct execute_request {
    std::string code;
    bool silent = false;
    bool store_history = true;
    bool stop_on_error = true;
    std::optional<std::chrono::milliseconds> timeout; // none: wait as long as it runs
    // Evaluated by the kernel after the code, if it ran without error; results in the reply.
    nlohmann::json user_expressions = nlohmann::json::object();
};

struct execute_hooks {
    // Every iopub message of this execution (parent is its execute_request), in order.
    std::function<void(const protocol::wire_message&)> on_iopub;
    // Asked when the kernel has said nothing for a second: false once it has died (kpoold's
    // poll), so a dead kernel ends the wait instead of hanging it.
    std::function<bool()> alive;
    // Interrupts the kernel (kpoold's signal op): used when the time limit passes.
    std::function<void()> interrupt;
    // Asked after every wake-up: true when the caller wants to stop (Ctrl-C); the kernel is
    // interrupted and the wait ends soon after.
    std::function<bool()> cancelled;
};

// Sends an execute_request and pumps messages until its execute_reply has arrived and iopub
// has gone idle for it (so every output was seen), as nbclient does.
execution execute(kernel_client& client, const execute_request& request,
                  const execute_hooks& hooks);

} // namespace kpool::jupyter
