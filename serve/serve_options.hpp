// What `kpool serve` runs with: where it listens, which kpoolds it fronts, who may call it, and
// its back-pressure limits.
#pragma once

#include "client/control_client.hpp"

#include <chrono>
#include <cstddef>
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
    // CORS: sent on every gateway answer when set (Access-Control-Allow-Origin, ...). An origin
    // of "*" also lets any page open a websocket; otherwise a websocket's Origin must be this
    // origin, or the same host as the request's.
    std::string allow_origin;
    std::string allow_credentials;
    std::string allow_headers;
    std::string allow_methods;
    std::string expose_headers;
    std::string max_age;
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
    // Callers must send `Authorization: token TOKEN` (or `Bearer TOKEN`); empty: no token, which
    // is refused off loopback.
    std::string token;
    // A request that gets no warm kernel within this long is answered 429 (Retry-After).
    std::chrono::milliseconds queue_timeout{5000};
    // Requests waiting for a kernel at once; one more is answered 429 at once.
    std::size_t max_queue = 64;
    // Fresh kernels held connected per pool for the next requests (serve/spare_kernels.hpp).
    std::size_t spares = 1;
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
