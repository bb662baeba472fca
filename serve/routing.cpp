// decide: the routing table of kpool serve and the checks before any work.
#include "serve/routing.hpp"

#include "protocol/control.hpp"

#include <sodium.h>

namespace kpool::serve {
namespace {

constexpr std::string_view run_prefix = "/v1/run/";

http_response wrong_method(std::string_view method, const std::string& route, const std::string& allowed) {
    http_response r = error_response(405, "method_not_allowed",
                                     protocol::echo_safe(method) + " is not allowed on " + route +
                                         " (allowed: " + allowed + ")");
    r.headers.emplace_back("allow", allowed);
    return r;
}

http_response stopping_response() { return error_response(503, "unavailable", "kpool serve is stopping"); }

} // namespace

bool token_matches(const std::optional<std::string>& authorization, const std::string& token) {
    if (!authorization) {
        return false;
    }
    for (const std::string_view scheme : {"token ", "Token ", "Bearer ", "bearer "}) {
        if (authorization->starts_with(scheme)) {
            const std::string_view given = std::string_view(*authorization).substr(scheme.size());
            // Constant time: how much of a guess is right must not show in the answer's timing.
            return given.size() == token.size() && sodium_memcmp(given.data(), token.data(), given.size()) == 0;
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

std::string route_label(std::string_view path) {
    if (path == "/v1/health" || path == "/metrics" || path == "/v1/exec") {
        return std::string(path);
    }
    if (path.starts_with("/api/kernels")) {
        return path.ends_with("/channels") ? "/api/kernels/channels" : "/api/kernels";
    }
    if (path.starts_with("/api/sessions")) {
        return "/api/sessions";
    }
    if (path.starts_with("/api/kernelspecs") || path.starts_with("/kernelspecs/")) {
        return "/api/kernelspecs";
    }
    if (path == "/api") {
        return "/api";
    }
    return path.starts_with(run_prefix) ? "/v1/run" : "other";
}

route decide(const request_view& r, const std::string& token, bool stopping) {
    if (r.path == "/v1/health") {
        return r.method == "GET" ? route{do_health{}} : route{wrong_method(r.method, "/v1/health", "GET")};
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
        http_response denied = error_response(401, "unauthorized", "a valid token is required: Authorization: token TOKEN");
        denied.headers.emplace_back("www-authenticate", "token");
        return denied;
    }
    if (gateway) {
        auto g = decide_gateway(r.method, r.path, r.body);
        if (auto* answer = std::get_if<http_response>(&g)) {
            return std::move(*answer);
        }
        if (auto* action = std::get_if<do_gateway>(&g)) {
            if (stopping && needs_new_kernel(action->action)) {
                return stopping_response();
            }
            return std::move(*action);
        }
        return do_preflight{};
    }
    if (r.path == "/metrics") {
        return r.method == "GET" ? route{do_metrics{}} : route{wrong_method(r.method, "/metrics", "GET")};
    }
    if (r.path == "/v1/exec") {
        if (r.method != "POST") {
            return wrong_method(r.method, "/v1/exec", "POST");
        }
        if (stopping) {
            return stopping_response();
        }
        auto body = parse_exec_body(r.body);
        if (!body) {
            return error_response(400, "bad_request", body.err().message);
        }
        return do_exec{std::move(*body)};
    }
    if (r.path.starts_with(run_prefix)) {
        if (r.method != "POST" && r.method != "GET") {
            return wrong_method(r.method, "/v1/run", "GET, POST");
        }
        if (stopping) {
            return stopping_response();
        }
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
    return error_response(404, "not_found", "no such resource: " + protocol::echo_safe(r.path));
}

http_response acquire_refusal(const nlohmann::json& error, int retry_after_s) {
    const std::string code = error.value("code", "internal");
    const std::string message = error.value("message", "kpoold refused");
    if (code == "timeout" || code == "capacity" || code == "unavailable") {
        http_response r = error_response(429, "overloaded", message);
        r.headers.emplace_back("retry-after", std::to_string(retry_after_s));
        return r;
    }
    if (code == "unknown_pool") {
        return error_response(404, "unknown_kernel", message);
    }
    if (code == "bad_request") {
        return error_response(400, "bad_request", message);
    }
    if (code == "shutting_down") {
        return error_response(503, "unavailable", message);
    }
    return error_response(502, "daemon_error", message);
}

http_response context_refusal(const nlohmann::json& error) {
    const std::string code = error.value("code", "");
    const std::string message = error.value("message", "kpoold refused");
    if (code == "bad_request") {
        return error_response(400, "bad_request", message);
    }
    return error_response(502, code == "unknown_kernel" ? "kernel_died" : "daemon_error", message);
}

} // namespace kpool::serve
