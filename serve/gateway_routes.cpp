// decide_gateway: the gateway API's routing table.
#include "serve/gateway_routes.hpp"

#include "protocol/control.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <vector>

namespace kpool::serve {
namespace {

using json = nlohmann::json;

std::vector<std::string_view> segments(std::string_view path) {
    std::vector<std::string_view> out;
    std::size_t at = 0;
    while (at < path.size()) {
        const std::size_t end = std::min(path.find('/', at), path.size());
        if (end > at) {
            out.push_back(path.substr(at, end - at));
        }
        at = end + 1;
    }
    return out;
}

http_response not_found(std::string_view path) {
    return error_response(404, "not_found", "no such resource: " + protocol::echo_safe(path));
}

http_response wrong_method(std::string_view method, std::string_view allowed) {
    http_response r = error_response(405, "method_not_allowed",
                                     protocol::echo_safe(method) + " is not allowed here (allowed: " +
                                         std::string(allowed) + ")");
    r.headers.emplace_back("allow", std::string(allowed));
    return r;
}

// Kernel ids and kernelspec names as jupyter_server's routes accept them.
bool plain_name(std::string_view s) {
    return !s.empty() && s.size() <= 256 && std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    }) && s.front() != '.';
}

std::variant<http_response, do_gateway, do_preflight> start_kernel(std::string_view body) {
    do_gateway g{gateway_action::start_kernel, {}, {}, {}, {}};
    if (body.empty()) {
        return g;
    }
    const json j = json::parse(body, nullptr, false);
    if (!j.is_object()) {
        return error_response(400, "bad_request", "the body must be a JSON object");
    }
    for (const auto& [key, value] : j.items()) {
        if (key == "name") {
            if (!value.is_null() && (!value.is_string() || !plain_name(value.get<std::string>()))) {
                return error_response(400, "bad_request", "'name' must be a kernelspec name");
            }
            g.name = value.is_string() ? value.get<std::string>() : "";
        } else if (key == "env") {
            if (value.is_null()) {
                continue;
            }
            if (!value.is_object()) {
                return error_response(400, "bad_request", "'env' must be an object of strings");
            }
            for (const auto& [k, v] : value.items()) {
                if (!v.is_string()) {
                    return error_response(400, "bad_request", "'env' must be an object of strings ('" +
                                                                   protocol::echo_safe(k) + "' is not)");
                }
                g.env[k] = v.get<std::string>();
            }
        }
        // Other fields (path, type, ...) are jupyter_server's own: ignored, as Kernel Gateway does.
    }
    return g;
}

} // namespace

bool is_gateway_path(std::string_view path) {
    return path == "/api" || path.starts_with("/api/") || path.starts_with("/kernelspecs/");
}

bool needs_new_kernel(gateway_action action) {
    return action == gateway_action::start_kernel || action == gateway_action::restart_kernel ||
           action == gateway_action::channels;
}

std::variant<http_response, do_gateway, do_preflight> decide_gateway(std::string_view method, std::string_view path,
                                                                    std::string_view body) {
    if (method == "OPTIONS") {
        return do_preflight{};
    }
    const auto s = segments(path);
    const auto only_get = [&](do_gateway g) -> std::variant<http_response, do_gateway, do_preflight> {
        if (method != "GET") {
            return wrong_method(method, "GET");
        }
        return g;
    };
    if (s.size() == 3 && s[0] == "kernelspecs") {
        if (!plain_name(s[1]) || !plain_name(s[2])) {
            return not_found(path);
        }
        return only_get({gateway_action::kernelspec_resource, {}, std::string(s[1]), std::string(s[2]), {}});
    }
    if (s.empty() || s[0] != "api") {
        return not_found(path);
    }
    if (s.size() == 1) {
        return only_get({gateway_action::api_info, {}, {}, {}, {}});
    }
    if (s[1] == "kernelspecs") {
        if (s.size() == 2) {
            return only_get({gateway_action::list_kernelspecs, {}, {}, {}, {}});
        }
        if (s.size() == 3 && plain_name(s[2])) {
            return only_get({gateway_action::get_kernelspec, {}, std::string(s[2]), {}, {}});
        }
        return not_found(path);
    }
    if (s[1] != "kernels") {
        return not_found(path);
    }
    if (s.size() == 2) {
        if (method == "GET") {
            return do_gateway{gateway_action::list_kernels, {}, {}, {}, {}};
        }
        if (method == "POST") {
            return start_kernel(body);
        }
        return wrong_method(method, "GET, POST");
    }
    if (!plain_name(s[2])) {
        return not_found(path);
    }
    const std::string id(s[2]);
    if (s.size() == 3) {
        if (method == "GET") {
            return do_gateway{gateway_action::get_kernel, id, {}, {}, {}};
        }
        if (method == "DELETE") {
            return do_gateway{gateway_action::delete_kernel, id, {}, {}, {}};
        }
        return wrong_method(method, "GET, DELETE");
    }
    if (s.size() == 4 && (s[3] == "interrupt" || s[3] == "restart")) {
        if (method != "POST") {
            return wrong_method(method, "POST");
        }
        return do_gateway{s[3] == "interrupt" ? gateway_action::interrupt_kernel : gateway_action::restart_kernel, id,
                          {}, {}, {}};
    }
    if (s.size() == 4 && s[3] == "channels") {
        return only_get({gateway_action::channels, id, {}, {}, {}});
    }
    return not_found(path);
}

} // namespace kpool::serve
