// What `kpool serve` runs with: where it listens, which kpoolds it fronts, who may call it, and
// its back-pressure limits.
#pragma once

#include "client/control_client.hpp"

#include <chrono>
#include <cstddef>
#include <string>
#include <vector>

namespace kpool::serve {

struct serve_options {
    std::string host = "127.0.0.1";
    int port = 8890;
    std::vector<std::string> endpoints; // kpoolds' control endpoints, tried in turn on failure
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
    std::size_t max_body = 16 << 20;
    std::string cert_file; // both: TLS
    std::string key_file;
    // On SIGTERM, requests in flight get this long to finish; then their code is interrupted.
    std::chrono::milliseconds stop_grace{30000};
};

// Whether `host` is a loopback address (127.0.0.0/8, ::1).
bool is_loopback(const std::string& host);

} // namespace kpool::serve
