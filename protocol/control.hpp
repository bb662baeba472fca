// Control protocol v1 (see protocol/PROTOCOL.md): parsing requests and building replies.
//
// A request is one JSON object with an "op"; each op's fields are checked here, so the daemon
// acts only on values that are already valid. Unknown fields are rejected, not ignored, so a
// typo never silently changes behaviour.
#pragma once

#include "protocol/result.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kpool::protocol {

// Larger requests get a bad_request reply.
inline constexpr std::int64_t max_request_bytes = 64 * 1024;
// Larger messages are refused by the socket itself (ZMQ_MAXMSGSIZE: libzmq drops the peer, so
// no reply is possible); between the two limits the client still gets an error reply.
inline constexpr std::int64_t max_message_bytes = 1024 * 1024;
// How deeply a request's JSON may nest; nothing valid needs more than 3 levels.
inline constexpr int max_request_depth = 16;
// Bounds on client-supplied durations.
inline constexpr std::int64_t max_timeout_ms = 3'600'000;
inline constexpr double max_lease_s = 31'536'000.0;
// An acquire without timeout_ms waits this long for a warm kernel (PROTOCOL.md); clients that
// wait for the reply add their own margin to it.
inline constexpr std::chrono::milliseconds default_acquire_timeout{30'000};

struct control_request {
    std::string op;
    nlohmann::json req_id; // null when the client sent none
    nlohmann::json body;   // the whole request object
};

// Bytes -> a request object with a string "op". On failure, req_id is lost (it may not parse).
result<control_request> parse_control_request(std::string_view bytes);

// The req_id of a request that failed to parse, when it can still be read, else null.
nlohmann::json salvage_req_id(std::string_view bytes);

struct acquire_args {
    std::string pool;
    std::optional<std::int64_t> timeout_ms;
    std::optional<double> lease_s;
    // Applied inside the kernel before it is handed over (jupyter_server and nbclient start
    // kernels with a working directory and extra environment).
    std::optional<std::string> cwd;
    std::map<std::string, std::string> env;
    // "history": "memory": an IPython kernel keeps its history in memory, as papermill and
    // nbclient start theirs (--HistoryManager.hist_file=:memory:), not in the user's file.
    bool memory_history = false;
    bool has_context() const { return cwd.has_value() || !env.empty() || memory_history; }
};
// For release and poll: just a kernel id.
struct kernel_args {
    std::string kernel_id;
};
// For renew: a kernel id and its new lease, counted from now.
struct renew_args {
    std::string kernel_id;
    double lease_s = 0;
};
struct signal_args {
    std::string kernel_id;
    int signum = 0;
};
// For context: a leased kernel and the cwd/env/history to apply in it (at least one of them).
struct context_args {
    std::string kernel_id;
    std::optional<std::string> cwd;
    std::map<std::string, std::string> env;
    bool memory_history = false; // as acquire's
};

// For resize (size set) and drain (size unset).
struct pool_args {
    std::string pool;
    std::optional<int> size;
};

// Each op's request is read by its row (protocol/op_table.hpp: read_request(ops::acquire, body));
// context also needs at least one of cwd, env and history.
result<context_args> parse_context(const nlohmann::json& body);

std::string make_ok_reply(nlohmann::json fields, const nlohmann::json& req_id);
std::string make_error_reply(const error& err, const nlohmann::json& req_id);

} // namespace kpool::protocol
