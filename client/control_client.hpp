// A blocking client for kpoold's control socket (protocol v1), for the CLI and the benchmarks.
#pragma once

#include "protocol/result.hpp"

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <chrono>
#include <string>

namespace kpool::client {

// $KPOOL_ENDPOINT when set, else the daemon's default endpoint for this user.
std::string default_endpoint();

class control_client {
public:
    explicit control_client(std::string endpoint);

    // Sends one request and waits up to `timeout` for its reply. The reply is returned as is,
    // "ok": false included; an error means no reply (daemon absent, socket missing, timeout).
    result<nlohmann::json> request(const nlohmann::json& req, std::chrono::milliseconds timeout);

    const std::string& endpoint() const { return m_endpoint; }

private:
    std::string m_endpoint;
    zmq::context_t m_zmq;
};

} // namespace kpool::client
