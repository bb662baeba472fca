// The nine fields of a Jupyter connection file, and conversion to and from JSON.
#pragma once

#include "protocol/result.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>

namespace kpool::protocol {

struct connection_info {
    std::string transport = "tcp"; // "tcp" or "ipc"
    std::string ip = "127.0.0.1";  // for ipc: the path prefix of the socket files
    std::uint16_t shell_port = 0;
    std::uint16_t iopub_port = 0;
    std::uint16_t stdin_port = 0;
    std::uint16_t control_port = 0;
    std::uint16_t hb_port = 0;
    std::string key;
    std::string signature_scheme = "hmac-sha256";
    std::string kernel_name;

    // True once the kernel has bound every channel (the file written by the kernel has ports).
    bool ports_assigned() const noexcept;

    // "tcp://127.0.0.1:5555" or "ipc:///run/kpool/kernels/ab12-3".
    std::string endpoint(std::uint16_t port) const;
};

nlohmann::json to_json(const connection_info& info);

// Accepts what kernels write (kernel_name may be missing or empty). Errors are bad_request.
result<connection_info> connection_info_from_json(const nlohmann::json& j);

} // namespace kpool::protocol
