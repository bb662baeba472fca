// check_front_door: Host, Origin, fetch metadata and body type, in that order (front_door.hpp).
#include "serve/front_door.hpp"

#include "protocol/text.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>

namespace kpool::serve {
namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return std::tolower(c); });
    return out;
}

std::string_view trim(std::string_view s) {
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) {
        s.remove_prefix(1);
    }
    while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) {
        s.remove_suffix(1);
    }
    return s;
}

// The name or address of a Host header, without its port or IPv6 brackets, lower case, without
// a trailing dot ("LocalHost.:80" and "localhost" are one name to a resolver).
std::string host_name(std::string_view host) {
    std::string_view name = host;
    if (name.starts_with('[')) {
        name = name.substr(1, name.find(']') == std::string_view::npos ? name.size()
                                                                       : name.find(']') - 1);
    } else if (const auto colon = name.find(':');
               colon != std::string_view::npos && name.rfind(':') == colon) {
        name = name.substr(0, colon);
    }
    std::string out = lower(name);
    if (!out.empty() && out.back() == '.') {
        out.pop_back();
    }
    return out;
}

bool listed(const std::vector<std::string>& list, const std::string& item) {
    return std::any_of(list.begin(), list.end(),
                       [&](const std::string& x) { return x == "*" || lower(x) == item; });
}

bool explicitly_allowed(std::string_view origin, const door_policy& policy) {
    return listed(policy.allow_origins, lower(origin));
}

http_response forbidden(const std::string& message) {
    return error_response(403, "forbidden", message);
}

// A preflight's Access-Control-Request-Headers, echoed: header names and list separators only.
std::string header_names(std::string_view requested) {
    std::string out;
    for (const char c : requested.substr(0, 1024)) {
        if (std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == ',' ||
            c == ' ') {
            out += c;
        }
    }
    return out;
}

// An Authorization header of the token schemes: set by a program or a page's own script, never
// by a browser on its own (unlike Basic credentials it remembers), and never cross-origin
// without a preflight. Whether the token is right is routing's to say.
bool token_scheme(const std::optional<std::string>& authorization) {
    if (!authorization) {
        return false;
    }
    const std::string scheme =
        lower(trim(*authorization).substr(0, trim(*authorization).find(' ')));
    return scheme == "token" || scheme == "bearer";
}

} // namespace

bool is_loopback_host(std::string_view host) {
    const std::string name = host_name(host);
    if (name == "localhost") {
        return true;
    }
    in_addr v4{};
    if (::inet_pton(AF_INET, name.c_str(), &v4) == 1) {
        return (ntohl(v4.s_addr) >> 24) == 127;
    }
    in6_addr v6{};
    return ::inet_pton(AF_INET6, name.c_str(), &v6) == 1 && IN6_IS_ADDR_LOOPBACK(&v6);
}

bool origin_allowed(std::string_view origin, std::string_view host, const door_policy& policy) {
    if (explicitly_allowed(origin, policy)) {
        return true;
    }
    // The server's own origin. A rebinding page's origin is its own name too, which is why the
    // Host check comes first.
    return !host.empty() && lower(origin) == (policy.tls ? "https://" : "http://") + lower(host);
}

std::optional<http_response> check_front_door(const door_request& r, const door_policy& policy) {
    // An empty Host is no browser's (every browser sends one): HTTP/1.0 tools may leave it out.
    if (!policy.token_required && !r.host.empty() && !is_loopback_host(r.host) &&
        !listed(policy.allow_hosts, host_name(r.host))) {
        return forbidden("Host '" + protocol::echo_safe(r.host) +
                         "' is not a loopback name: without a token kpool serve answers only "
                         "requests for localhost, 127.0.0.0/8 or [::1], which no other site's page "
                         "can send (DNS rebinding); --allow-host NAME admits another name");
    }
    if (r.origin && !origin_allowed(*r.origin, r.host, policy)) {
        return forbidden(
            "requests from the web page origin '" + protocol::echo_safe(*r.origin) +
            "' are refused: only the server's own origin and those of --allow-origin may call");
    }
    if (!r.origin && r.sec_fetch_site) {
        const std::string site = lower(trim(*r.sec_fetch_site));
        if (site == "cross-site" || site == "same-site") {
            return forbidden("a request another site's page made (Sec-Fetch-Site: " +
                             protocol::echo_safe(site) + ") is refused");
        }
    }
    if ((r.method == "POST" || r.method == "PUT" || r.method == "PATCH") &&
        !token_scheme(r.authorization)) {
        const std::string_view type =
            r.content_type ? std::string_view(*r.content_type) : std::string_view();
        if (lower(trim(type.substr(0, type.find(';')))) != "application/json") {
            return error_response(
                415, "unsupported_media_type",
                std::string(r.method) + " needs Content-Type: application/json (" +
                    (r.content_type ? "not '" + protocol::echo_safe(*r.content_type) + "'"
                                    : "none was sent") +
                    "); with curl: --json DATA, or -H 'Content-Type: application/json'");
        }
    }
    return std::nullopt;
}

std::vector<std::pair<std::string, std::string>>
cors_headers(const door_request& r, const door_policy& policy, const cors_settings& settings,
             bool preflight, const std::optional<std::string>& requested_headers) {
    std::vector<std::pair<std::string, std::string>> out;
    if (!r.origin || !explicitly_allowed(*r.origin, policy)) {
        return out;
    }
    out.emplace_back("access-control-allow-origin", *r.origin);
    out.emplace_back("vary", "Origin");
    const auto add = [&](const char* name, const std::string& value) {
        if (!value.empty()) {
            out.emplace_back(name, value);
        }
    };
    add("access-control-allow-credentials", settings.allow_credentials);
    add("access-control-expose-headers", settings.expose_headers);
    if (preflight) {
        add("access-control-allow-methods", settings.allow_methods.empty()
                                                ? std::string("GET, POST, PATCH, DELETE, OPTIONS")
                                                : settings.allow_methods);
        add("access-control-allow-headers", !settings.allow_headers.empty()
                                                ? settings.allow_headers
                                                : header_names(requested_headers.value_or("")));
        add("access-control-max-age", settings.max_age);
    } else {
        // As Kernel Gateway sends them: on every answer, when set.
        add("access-control-allow-methods", settings.allow_methods);
        add("access-control-allow-headers", settings.allow_headers);
        add("access-control-max-age", settings.max_age);
    }
    return out;
}

} // namespace kpool::serve
