// decide: the table of /v1 routes (the gateway's is in gateway_routes.cpp) and the checks before
// any work: a route is a row here, its reader, and its handler in server.cpp's dispatch.
#include "serve/routing.hpp"

#include "protocol/text.hpp"

#include <sodium.h>

#include <algorithm>
#include <array>

namespace kpool::serve {
namespace {

constexpr std::string_view run_prefix = "/v1/run/";

http_response wrong_method(std::string_view method, const std::string& route,
                           const std::string& allowed) {
    http_response r = error_response(405, "method_not_allowed",
                                     protocol::echo_safe(method) + " is not allowed on " + route +
                                         " (allowed: " + allowed + ")");
    r.headers.emplace_back("allow", allowed);
    return r;
}

} // namespace

bool token_matches(const std::optional<std::string>& authorization, const std::string& token) {
    if (!authorization) {
        return false;
    }
    for (const std::string_view scheme : {"token ", "Token ", "Bearer ", "bearer "}) {
        if (authorization->starts_with(scheme)) {
            const std::string_view given = std::string_view(*authorization).substr(scheme.size());
            // Constant time: how much of a guess is right must not show in the answer's timing.
            return given.size() == token.size() &&
                   sodium_memcmp(given.data(), token.data(), given.size()) == 0;
        }
    }
    return false;
}

bool query_token_matches(std::string_view query, const std::string& token) {
    bool match = false;
    for_each_query_pair(query, [&](const std::string& name, const std::string& value) {
        match = match || (name == "token" && value.size() == token.size() &&
                          sodium_memcmp(value.data(), token.data(), value.size()) == 0);
    });
    return match;
}

namespace {

// One /v1 (or operator) route: a row, and the reader that turns a request into its action.
struct v1_route {
    std::string_view path;    // exact; a prefix when it ends with '/' (the rest is the reader's)
    std::string_view methods; // as the Allow header lists them
    std::string_view label;   // the metrics label of every path it serves
    bool needs_token;         // load balancers' and kubelets' probes carry none
    bool runs_code;           // refused with 503 while kpool serve is stopping
    route (*read)(const request_view&);
    std::string_view shown_path; // kpool serve --help
    std::string_view help;       // kpool serve --help; '\n' starts an indented line
};

route read_health(const request_view&) { return do_health{}; }
route read_metrics(const request_view&) { return do_metrics{}; }

route read_exec(const request_view& r) {
    auto body = parse_exec_body(r.body);
    if (!body) {
        return error_response(400, "bad_request", body.err().message);
    }
    return do_exec{std::move(*body)};
}

route read_run(const request_view& r) {
    auto body = r.method == "GET" ? parse_run_query(r.query) : parse_run_body(r.body);
    if (body && r.method == "POST") {
        if (auto st = apply_format(r.query, *body); !st) {
            return error_response(400, "bad_request", st.err().message);
        }
    }
    if (!body) {
        return error_response(400, "bad_request", body.err().message);
    }
    return do_run{std::string(r.path.substr(run_prefix.size())), std::move(*body)};
}

// POST /v1/run: the notebook comes in the body (a client's local file), not from --root.
route read_run_upload(const request_view& r) {
    auto body = parse_run_body(r.body, true);
    if (body) {
        if (auto st = apply_format(r.query, *body); !st) {
            return error_response(400, "bad_request", st.err().message);
        }
    }
    if (!body) {
        return error_response(400, "bad_request", body.err().message);
    }
    return do_run{"", std::move(*body)};
}

// clang-format off
constexpr std::array v1_table{
    v1_route{"/v1/health", "GET",       "/v1/health", false, false, read_health, "/v1/health",
             "200 when a kpoold answers and a pool has or can start a kernel,\nelse 503"},
    v1_route{"/metrics",   "GET",       "/metrics",   true,  false, read_metrics, "/metrics", "Prometheus text"},
    v1_route{"/v1/exec",   "POST",      "/v1/exec",   true,  true,  read_exec, "/v1/exec",
             "{\"code\": \"...\", \"kernel\"?, \"timeout\"?, \"cwd\"?, \"env\"?}; with\n"
             "Accept: application/x-ndjson, each output as a line as it comes"},
    v1_route{run_prefix,   "GET, POST", "/v1/run",    true,  true,  read_run, "/v1/run/PATH",
             "POST {\"parameters\": {...}, \"kernel\"?, \"timeout\"?, \"cwd\"?, \"env\"?}:\n"
             "the notebook PATH under --root, run as `kpool run` runs it;\n"
             "GET ?a=1&b=x the same with parameters typed as -p types them"},
    v1_route{"/v1/run",    "POST",      "/v1/run",    true,  true,  read_run_upload, "/v1/run",
             "{\"notebook\": {...}, \"parameters\"?, ...}: a notebook sent in the body\n"
             "(kpool feed's and `kpool run --url`'s; docs/feed.md has those clients)"},
};
// clang-format on

const v1_route* find_v1_route(std::string_view path) {
    for (const v1_route& row : v1_table) {
        if (row.path.ends_with('/') ? path.starts_with(row.path) : path == row.path) {
            return &row;
        }
    }
    return nullptr;
}

bool allows(std::string_view methods, std::string_view method) {
    for (std::size_t at = 0; at < methods.size();) {
        const std::size_t end = std::min(methods.find(", ", at), methods.size());
        if (methods.substr(at, end - at) == method) {
            return true;
        }
        at = end + 2;
    }
    return false;
}

// The row's answer once the token (if the row needs one) is checked.
route serve_row(const v1_route& row, const request_view& r, bool stopping) {
    if (!allows(row.methods, r.method)) {
        return wrong_method(r.method, std::string(row.label), std::string(row.methods));
    }
    if (row.runs_code && stopping) {
        return stopping_response();
    }
    return row.read(r);
}

} // namespace

std::string endpoint_help() {
    std::string out;
    for (const v1_route& row : v1_table) {
        out += protocol::help_lines(std::string(row.methods) + " " + std::string(row.shown_path),
                                    row.help);
    }
    out += "the Kernel Gateway API, for `jupyter server --gateway-url http://HOST:PORT` (pooled\n"
           "kernels; a restart swaps in a warm one):\n";
    return out + gateway_endpoint_help();
}

std::string route_label(std::string_view path) {
    if (const v1_route* row = find_v1_route(path)) {
        return std::string(row->label);
    }
    if (const auto label = gateway_route_label(path)) {
        return std::string(*label);
    }
    return "other";
}

route decide(const request_view& r, const std::string& token, bool stopping) {
    const v1_route* row = find_v1_route(r.path);
    if (row && !row->needs_token) {
        return serve_row(*row, r, stopping);
    }
    if (r.method == "OPTIONS") {
        return do_preflight{}; // browsers send preflights without credentials
    }
    const bool gateway = is_gateway_path(r.path);
    // ?token= only where a browser cannot send a header: its websocket. Elsewhere a token in a
    // URL would end up in histories, proxies' logs and Referer headers.
    const bool websocket = gateway && r.path.ends_with("/channels");
    if (!token.empty() && !token_matches(r.authorization, token) &&
        !(websocket && query_token_matches(r.query, token))) {
        http_response denied = error_response(
            401, "unauthorized", "a valid token is required: Authorization: token TOKEN");
        denied.headers.emplace_back("www-authenticate", "token");
        return denied;
    }
    if (gateway) {
        return std::visit([](auto&& decided) -> route { return std::move(decided); },
                          decide_gateway(r.method, r.path, r.body, stopping));
    }
    if (row) {
        return serve_row(*row, r, stopping);
    }
    return error_response(404, "not_found", "no such resource: " + protocol::echo_safe(r.path));
}

http_response acquire_refusal(const error& refused, int retry_after_s) {
    switch (refused.code) {
    case errc::timeout:
    case errc::capacity:
    case errc::unavailable: return overloaded_response(refused.message, retry_after_s);
    case errc::unknown_pool: return error_response(404, "unknown_kernel", refused.message);
    case errc::bad_request: return error_response(400, "bad_request", refused.message);
    case errc::shutting_down: return error_response(503, "unavailable", refused.message);
    default: return error_response(502, "daemon_error", refused.message);
    }
}

http_response context_refusal(const error& refused) {
    if (refused.code == errc::bad_request) {
        return error_response(400, "bad_request", refused.message);
    }
    return error_response(502,
                          refused.code == errc::unknown_kernel ? "kernel_died" : "daemon_error",
                          refused.message);
}

} // namespace kpool::serve
