// A blocking client for kpoold's control socket (protocol v1), for the CLI and the benchmarks.
#pragma once

#include "protocol/result.hpp"

#include <nlohmann/json.hpp>
#include <zmq.hpp>

#include <chrono>
#include <string>
#include <utility>

namespace kpool::client {

// $KPOOL_ENDPOINT when set, else the daemon's default endpoint for this user.
std::string default_endpoint();

// CURVE keys for a tcp:// control endpoint, all Z85 text. Empty: no CURVE (ipc).
struct curve_keys {
    std::string server_public;
    std::string client_public;
    std::string client_secret;
    bool empty() const { return server_public.empty(); }
};

// The keys a client uses: `server_key` (else $KPOOL_SERVER_KEY) and the secret key in
// `client_key_file` (else $KPOOL_CLIENT_KEY_FILE), its public half derived. Both or neither.
result<curve_keys> load_curve_keys(std::string server_key, std::string client_key_file);

// A fresh CURVE key pair (Z85 public, Z85 secret).
std::pair<std::string, std::string> make_curve_keypair();

// How long a daemon may take to accept a tcp connection and complete the ZeroMQ handshake before
// it counts as unreachable (a refused connection counts at once).
inline constexpr std::chrono::milliseconds connect_timeout{1000};

// One daemon.
class control_client {
public:
    explicit control_client(std::string endpoint, curve_keys keys = {});

    // Sends one request and waits up to `timeout` for its reply. The reply is returned as is,
    // "ok": false included; an error means no reply (daemon absent, socket missing, timeout,
    // or the daemon refused this client: wrong uid or CURVE key).
    result<nlohmann::json> request(const nlohmann::json& req, std::chrono::milliseconds timeout);

    const std::string& endpoint() const { return m_endpoint; }

private:
    std::string m_endpoint;
    curve_keys m_keys;
    zmq::context_t m_zmq;
};

} // namespace kpool::client
