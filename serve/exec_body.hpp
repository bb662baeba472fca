// The bodies of POST /v1/exec, POST /v1/run/{path} and POST /v1/run (and GET /v1/run's query), read
// and checked before anything else happens: every field's type and range, unknown fields refused,
// so a misspelt field is never silently ignored.
#pragma once

#include "params/values.hpp"
#include "protocol/result.hpp"

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kpool::serve {

// What both kinds of request may say about the kernel they run on.
struct kernel_fields {
    std::string kernel; // a pool name; empty: the server's default (exec) or the notebook's (run)
    std::optional<std::chrono::milliseconds> timeout; // exec: the code's; run: each cell's
    std::string cwd; // absolute; empty: the kernel's own (exec) or the notebook's folder (run)
    std::map<std::string, std::string> env;
};

struct exec_body {
    std::string code;
    kernel_fields kernel;
};

struct run_body {
    // POST /v1/run: the notebook itself, sent in the body (its JSON text); empty: the notebook
    // is {path} under --root.
    std::string notebook;
    params::parameters parameters = params::parameters::object();
    kernel_fields kernel;
    bool outputs_only = false; // ?format=outputs
    bool report_mode =
        false; // "report_mode": papermill's --report-mode (code cells' inputs hidden)
};

// bad_request with a message that names the field.
result<exec_body> parse_exec_body(std::string_view body);
// `uploaded`: POST /v1/run, whose body must carry the notebook itself in "notebook".
result<run_body> parse_run_body(std::string_view body, bool uploaded = false);
// GET /v1/run/{path}?a=1&b=x: every name but `format` and `kernel` a parameter, typed as `-p`
// types it; `format=outputs` or `format=notebook`; `kernel=NAME` the kernel to run on (a pool,
// else a kernelspec: protocol/pool_names.hpp), as a POST body's "kernel".
result<run_body> parse_run_query(std::string_view query);
// Calls fn(name, value) for each `name=value` of a query string, both %-decoded.
void for_each_query_pair(std::string_view query,
                         const std::function<void(const std::string&, const std::string&)>& fn);

// Applies ?format=... to a POST's body.
status apply_format(std::string_view query, run_body& body);

} // namespace kpool::serve
