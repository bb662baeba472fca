// What a request asks kpool serve for, decided from its method, path, query, body and token
// alone (no sockets, no kernels): one of the actions that need the server (run code, health,
// metrics), or the answer it gets at once (400, 401, 404, 405, 503 while stopping). Pure, so
// tests and the fuzzer (tests/fuzz/fuzz_serve.cpp) reach every decision directly.
#pragma once

#include "serve/exec_body.hpp"
#include "serve/gateway_routes.hpp"
#include "serve/http_response.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace kpool::serve {

struct request_view {
    std::string_view method;
    std::string_view path; // normalized, without the query
    std::string_view query;
    std::string_view body;
    std::optional<std::string> authorization; // the header, if sent
};

struct do_exec {
    exec_body body;
};
struct do_run {
    std::string path; // below the root; empty: the notebook is in the body (POST /v1/run)
    run_body body;
};
struct do_health {};
struct do_metrics {};

using route = std::variant<http_response, do_exec, do_run, do_health, do_metrics, do_gateway,
                           do_session, do_preflight>;

// After the front door (serve/front_door.hpp). `token` empty: none required; else
// `Authorization: token T` (or `Bearer T`), and on a kernel's websocket (.../channels) also
// `?token=T` (a browser's websocket cannot send headers). OPTIONS on any path is a CORS
// preflight, which needs no token. `stopping`: requests that would run code or start a kernel
// get 503.
route decide(const request_view& request, const std::string& token, bool stopping);

// Every endpoint, a line or more each, from the route tables: for `kpool serve --help`.
std::string endpoint_help();

// The metrics label of a path: the route it belongs to, or "other".
std::string route_label(std::string_view path);

// Whether a query string has `token=TOKEN`, compared in constant time.
bool query_token_matches(std::string_view query, const std::string& token);

// Whether `authorization` carries `token` (`token T` or `Bearer T`), compared in constant time.
bool token_matches(const std::optional<std::string>& authorization, const std::string& token);

} // namespace kpool::serve
