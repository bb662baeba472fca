// Control replies as clients read them: a refusal as an error with its code, and a typed view
// of the replies clients act on (acquire, poll, status), so no caller digs through JSON by hand.
// Readers are lenient about fields they do not use: newer daemons may add fields.
#pragma once

#include "protocol/connection_info.hpp"
#include "protocol/pool_names.hpp"
#include "protocol/result.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kpool::protocol {

// An error code by its name in a reply; nullopt for a name this version does not know.
std::optional<errc> errc_from_string(std::string_view name);

// nullopt for an ok reply; else its error (a code we do not know, or no error at all, is
// internal, and a missing message is "kpoold refused").
std::optional<error> refusal_of(const nlohmann::json& reply);

struct acquired_kernel {
    std::string kernel_id;
    std::string pool;
    std::string connection_file;
    std::int64_t pid = 0;
    int pool_warm = 0; // warm kernels the pool had left
    // The kernel is leased even when its connection is unusable: release it then.
    result<connection_info> connection = error{errc::internal, "no connection"};
};
// Refused: the reply's error. A reply without a kernel_id is internal.
result<acquired_kernel> read_acquire_reply(const nlohmann::json& reply);

struct kernel_poll {
    bool alive = true;
    std::optional<int> exit_code; // once it has exited, when the daemon knows it
    std::string reason;           // what killed it, when known: "out of memory (limit 512 MiB)"
};
result<kernel_poll> read_poll_reply(const nlohmann::json& reply);

// Every pool of a status reply, removed ones included (they say so).
result<std::vector<pool_summary>> read_status_pools(const nlohmann::json& reply);

} // namespace kpool::protocol
