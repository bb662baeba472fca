// One POST /v1/exec from body to answer: a warm kernel acquired with the request's cwd/env, the
// code executed, its outputs collected (as `kpool exec --json` gives them), the kernel released.
// Owns itself (shared) until the kernel is back with kpoold, whatever happened to the caller: a
// client that goes away mid-run gets its kernel interrupted and released.
#pragma once

#include "serve/exec_body.hpp"
#include "serve/http_server.hpp"

#include <memory>

namespace kpool::serve {

class server;

void start_exec_call(server& owner, exchange_ptr exchange, exec_body body,
                     std::chrono::steady_clock::time_point arrived);

} // namespace kpool::serve
