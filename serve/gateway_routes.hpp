// The Kernel Gateway API's routes (jupyter_server's /api/kernels, /api/kernelspecs and
// /api/sessions, as Kernel Gateway serves them), decided from method, path and body alone: one
// table, a row per method and path pattern. Pure, like routing.
#pragma once

#include "serve/http_response.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace kpool::serve {

// What a gateway request asks of the kernels kpool serve holds (serve/gateway.hpp).
enum class gateway_action {
    api_info,            // GET /api
    list_kernelspecs,    // GET /api/kernelspecs
    get_kernelspec,      // GET /api/kernelspecs/{name}
    kernelspec_resource, // GET /kernelspecs/{name}/{file}
    list_kernels,        // GET /api/kernels
    start_kernel,        // POST /api/kernels
    get_kernel,          // GET /api/kernels/{id}
    delete_kernel,       // DELETE /api/kernels/{id}
    interrupt_kernel,    // POST /api/kernels/{id}/interrupt
    restart_kernel,      // POST /api/kernels/{id}/restart
    channels,            // GET /api/kernels/{id}/channels (websocket)
};

// What a request asks of the sessions (serve/gateway_sessions.hpp), which sit above the kernels.
enum class session_action {
    list,   // GET /api/sessions
    create, // POST /api/sessions
    get,    // GET /api/sessions/{session}
    update, // PATCH /api/sessions/{session}
    remove, // DELETE /api/sessions/{session}
};

// What a POST or PATCH of /api/sessions names; absent fields are left as they are (PATCH) or
// take their defaults (POST: type "notebook", the default kernel).
struct session_fields {
    std::optional<std::string> path;
    std::optional<std::string> name;
    std::optional<std::string> type;
    std::optional<std::string> kernel_id;   // "kernel": {"id": ...}: wins over a name
    std::optional<std::string> kernel_name; // "kernel": {"name": ...}
};

struct do_gateway {
    gateway_action action = gateway_action::api_info;
    std::string kernel_id; // kernel actions
    std::string name;      // kernelspec actions; start_kernel: the body's "name" (empty: default)
    std::string resource;  // kernelspec_resource
    std::map<std::string, std::string> env; // start_kernel: the body's "env", unfiltered
};

struct do_session {
    session_action action = session_action::list;
    std::string session_id; // get, update, remove
    session_fields fields;  // create, update
};

// A CORS preflight (OPTIONS) on a gateway path: answered with the CORS headers, no token needed.
struct do_preflight {};

// Whether `path` belongs to the gateway API (/api, /api/..., /kernelspecs/...).
bool is_gateway_path(std::string_view path);

// The action for a gateway path, or the answer it gets at once (404, 405, 400). `stopping`:
// a row that may start a kernel is answered 503.
std::variant<http_response, do_gateway, do_session, do_preflight>
decide_gateway(std::string_view method, std::string_view path, std::string_view body,
               bool stopping = false);

// The metrics label of a gateway path: its row's ("/api/kernels", "/api/sessions", ...), or
// none when no row's pattern matches it.
std::optional<std::string_view> gateway_route_label(std::string_view path);

// One line per row, "METHOD PATH  what it does", for `kpool serve --help`.
std::string gateway_endpoint_help();

} // namespace kpool::serve
