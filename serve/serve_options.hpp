// What `kpool serve` runs with: where it listens, which kpoolds it fronts, who may call it, and
// its back-pressure limits.
#pragma once

#include "client/control_client.hpp"
#include "serve/front_door.hpp"

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace kpool::serve {

// The Kernel Gateway API's settings, named as Kernel Gateway's flags are.
struct gateway_options {
    // A kernel idle (no message either way) this long is shut down; 0: never.
    std::chrono::seconds cull_idle_timeout{0};
    std::chrono::seconds cull_interval{300};
    bool cull_connected = false; // cull kernels with a websocket connected too
    bool cull_busy = false;      // cull kernels that are busy too
    // The lease each kernel is held under, renewed every third of it while kpool serve holds
    // the kernel: a kpool serve that dies leaves its kernels running this long at most.
    std::chrono::seconds kernel_lease{120};
    // Variables of a start request's env passed to the kernel besides KERNEL_*.
    std::vector<std::string> env_whitelist;
    std::size_t max_kernels = 0; // held at once; 0: no limit beyond the pools'
};

struct serve_options {
    std::string host = "127.0.0.1";
    int port = 8890;
    std::vector<std::string> endpoints; // kpoolds' control endpoints, tried in turn on failure
    // The setting `endpoints` came from; with a dns: entry it is resolved again every
    // resolve_every (serve/endpoint_resolver.hpp).
    std::string endpoint_setting;
    std::chrono::milliseconds resolve_every{30000};
    client::curve_keys keys;            // for tcp:// endpoints
    std::string default_kernel = "python3"; // the pool a request without "kernel" runs on
    std::string root; // notebooks POST/GET /v1/run/{path} may run; empty: none
    std::string save_dir; // each executed notebook kept as SAVE_DIR/REQUEST_ID.ipynb; empty: none
    // Callers must send `Authorization: token TOKEN` (or `Bearer TOKEN`). Empty: kpool serve
    // makes one and writes it to token_dir/serve-PORT.token (0600), unless no_token.
    std::string token;
    // No token at all (--no-token): loopback only, and then the Host must be a loopback name.
    bool no_token = false;
    // Where a token kpool serve made is written for the same user's clients (a 0700 directory).
    std::string token_dir;
    // Web page origins that may call (CORS) besides the server's own: exact origins, or "*".
    std::vector<std::string> allow_origins;
    // Host names accepted besides loopback's while no token is required (DNS rebinding), or "*".
    std::vector<std::string> allow_hosts;
    cors_settings cors; // the other CORS headers an allowed origin's answers get
    // A request that gets no warm kernel within this long is answered 429 (Retry-After).
    std::chrono::milliseconds queue_timeout{5000};
    // Requests waiting for a kernel at once; one more is answered 429 at once.
    std::size_t max_queue = 64;
    // Fresh kernels held connected per pool for the next requests (serve/spare_kernels.hpp).
    std::size_t spares = 1;
    // A /v1/run notebook's execute_requests at the kernel at once (runner/cell_pipeline); none:
    // runner::default_cells_ahead.
    std::optional<std::size_t> cells_ahead;
    std::size_t max_body = 16 << 20;
    std::size_t max_header = 64 << 10; // names and values together; more: 431
    std::size_t max_connections = 1024; // open at once; more wait in the listen backlog
    std::string cert_file; // both: TLS
    std::string key_file;
    // On SIGTERM, requests in flight get this long to finish; then their code is interrupted.
    std::chrono::milliseconds stop_grace{30000};
    gateway_options gateway;
};

// Whether `host` is a loopback address (127.0.0.0/8, ::1).
bool is_loopback(const std::string& host);

} // namespace kpool::serve
