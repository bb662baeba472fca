// One POST (or GET) /v1/run/{path}: the notebook under the served root, prepared as `kpool run`
// prepares it (runner/notebook_prep) and executed cell by cell through the same engine
// (runner/notebook_engine), here driven by the event loop, on a fresh warm kernel.
//
// The answer: the last output of the cell tagged `response` with its own mime type, or every
// code cell's outputs (?format=outputs), or the executed notebook; a cell that raised is 500
// with ename, evalue, traceback and the cell's index, a cell over the time limit 504, a kernel
// that died 502.
#pragma once

#include "serve/exec_body.hpp"
#include "serve/http_server.hpp"

#include <chrono>
#include <string>

namespace kpool::serve {

class request_services;

// `path` is the request's (normalized) path after /v1/run.
void start_run_call(request_services& owner, exchange_ptr exchange, const std::string& path,
                    run_body body, std::chrono::steady_clock::time_point arrived);

} // namespace kpool::serve
