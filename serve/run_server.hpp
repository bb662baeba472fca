// kpool serve's main loop: a libuv loop with the server on it until SIGINT or SIGTERM, then a
// clean stop (no new requests, those in flight finish and give their kernels back).
#pragma once

#include "serve/serve_options.hpp"

#include <cstdio>

namespace kpool::serve {

// Runs until stopped; 0 after a clean stop, 1 when the server cannot start (the reason on `log`).
int run_server(const serve_options& options, std::FILE* log);

} // namespace kpool::serve
