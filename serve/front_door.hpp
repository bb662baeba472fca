// The front door: checks every request passes before kpool serve looks at what it asks for
// (serve/routing.hpp), so that no web page the user has open in a browser can make kpool serve
// run code or start a kernel (docs/security.md has the threat model). Pure: headers in, a
// refusal or nothing out, and the CORS headers an allowed origin gets.
//
//   Host    while no token is required, a loopback name or address or one of --allow-host
//           (a DNS-rebinding page reaches 127.0.0.1 under a name of its own), else 403;
//   Origin  absent (not a browser, or a same-origin navigation), the server's own
//           (scheme://Host), or one of --allow-origin, else 403 ("null" included);
//   fetch   a request without Origin that a browser marks cross-site or same-site
//           (Sec-Fetch-Site: an <img>, a link, a form navigation) is refused, 403;
//   body    POST, PUT and PATCH must say Content-Type: application/json, else 415, so no
//           "simple" cross-site request (text/plain, a form) reaches a handler; unless they
//           carry `Authorization: token|Bearer ...`, which no page can send another origin
//           without a preflight (refused above) and no browser adds by itself. JupyterLab's
//           client library posts JSON as text/plain with its token that way.
#pragma once

#include "config/config.hpp"

#include "serve/http_response.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kpool::serve {

// Who may call: decided once from the options (serve_options.hpp).
struct door_policy {
    bool token_required = true;
    bool tls = false;
    // Exact origins ("https://lab.example:8443", "null"), or "*": any.
    std::vector<std::string> allow_origins;
    // Host names (no port) accepted besides loopback's while no token is required, or "*": any.
    std::vector<std::string> allow_hosts;
};

// The headers the checks read; absent ones are nullopt.
struct door_request {
    std::string_view method;
    std::string_view host; // the Host header (HTTP/2: :authority); empty when none was sent
    std::optional<std::string> origin;
    std::optional<std::string> content_type;
    std::optional<std::string> sec_fetch_site;
    std::optional<std::string> authorization;
};

// nullopt: the request may go on to routing; else its answer (403 or 415, a JSON error).
std::optional<http_response> check_front_door(const door_request& request,
                                              const door_policy& policy);

// Whether `origin` may call: the server's own (scheme://host), or one the policy allows.
bool origin_allowed(std::string_view origin, std::string_view host, const door_policy& policy);

// Whether `host` (a Host header: name or address, with an optional port) names this machine's
// loopback: localhost, 127.0.0.0/8 or [::1].
bool is_loopback_host(std::string_view host);

// The CORS response headers (beyond the origin) as the operator set them; empty: not sent.
using cors_settings = config::cors_settings;

// The CORS headers of an answer to a request with this Origin: none unless the origin is one of
// --allow-origin (a same-origin page needs none). The allowed origin is echoed (with
// Vary: Origin), never "*", so credentials work too. A preflight (`preflight`, with the
// request's Access-Control-Request-Headers) also gets the methods and headers it may use.
std::vector<std::pair<std::string, std::string>>
cors_headers(const door_request& request, const door_policy& policy, const cors_settings& settings,
             bool preflight, const std::optional<std::string>& requested_headers);

using config::split_list;

} // namespace kpool::serve
