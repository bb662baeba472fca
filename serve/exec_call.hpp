// One POST /v1/exec from body to answer: the code executed on a fresh warm kernel (kernel_call
// acquires and releases it), its outputs collected as `kpool exec --json` gives them. The
// request has been admitted (server::admit); the call ends it with request_finished.
#pragma once

#include "serve/exec_body.hpp"
#include "serve/http_server.hpp"

#include <chrono>

namespace kpool::serve {

class request_services;

void start_exec_call(request_services& owner, exchange_ptr exchange, exec_body body,
                     std::chrono::steady_clock::time_point arrived);

} // namespace kpool::serve
