// The Kernel Gateway API's routes (jupyter_server's /api/kernels and /api/kernelspecs, as
// Kernel Gateway serves them), decided from method, path and body alone. Pure, like routing.
#pragma once

#include "serve/http_response.hpp"

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

namespace kpool::serve {

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

struct do_gateway {
    gateway_action action = gateway_action::api_info;
    std::string kernel_id; // kernel actions
    std::string name;      // kernelspec actions; start_kernel: the body's "name" (empty: default)
    std::string resource;  // kernelspec_resource
    std::map<std::string, std::string> env; // start_kernel: the body's "env", unfiltered
};

// A CORS preflight (OPTIONS) on a gateway path: answered with the CORS headers, no token needed.
struct do_preflight {};

// Whether `path` belongs to the gateway API (/api, /api/..., /kernelspecs/...).
bool is_gateway_path(std::string_view path);

// The action for a gateway path, or the answer it gets at once (404, 405, 400).
std::variant<http_response, do_gateway, do_preflight> decide_gateway(std::string_view method, std::string_view path,
                                                                    std::string_view body);

// Whether a start or restart would need a kernel (refused with 503 while stopping).
bool needs_new_kernel(gateway_action action);

} // namespace kpool::serve
