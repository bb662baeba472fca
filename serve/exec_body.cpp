// parse_exec_body: JSON in, a checked exec_body or the reason it is not one.
#include "serve/exec_body.hpp"

#include "protocol/control.hpp"

#include <nlohmann/json.hpp>

#include <cmath>

namespace kpool::serve {

using json = nlohmann::json;

result<exec_body> parse_exec_body(std::string_view text) {
    const json j = json::parse(text, nullptr, false);
    if (j.is_discarded()) {
        return error{errc::bad_request, "the body is not JSON"};
    }
    if (!j.is_object()) {
        return error{errc::bad_request, "the body must be a JSON object"};
    }
    exec_body out;
    for (const auto& [key, value] : j.items()) {
        if (key == "code") {
            if (!value.is_string()) {
                return error{errc::bad_request, "field 'code' must be a string"};
            }
            out.code = value.get<std::string>();
        } else if (key == "kernel") {
            if (!value.is_string() || value.get<std::string>().empty()) {
                return error{errc::bad_request, "field 'kernel' must be a non-empty string"};
            }
            out.kernel = value.get<std::string>();
        } else if (key == "timeout") {
            if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() <= 0 ||
                value.get<double>() > protocol::max_timeout_ms / 1000.0) {
                return error{errc::bad_request, "field 'timeout' must be a number of seconds above 0 "
                                                "and at most 3600"};
            }
            out.timeout = std::chrono::milliseconds(static_cast<std::int64_t>(std::ceil(value.get<double>() * 1000)));
        } else if (key == "cwd") {
            if (!value.is_string() || !value.get<std::string>().starts_with("/")) {
                return error{errc::bad_request, "field 'cwd' must be an absolute path"};
            }
            out.cwd = value.get<std::string>();
        } else if (key == "env") {
            if (!value.is_object()) {
                return error{errc::bad_request, "field 'env' must be an object of strings"};
            }
            for (const auto& [name, v] : value.items()) {
                if (!v.is_string() || name.empty() || name.find('=') != std::string::npos) {
                    return error{errc::bad_request, "field 'env' must be an object of strings, "
                                                    "names without '='"};
                }
                out.env[name] = v.get<std::string>();
            }
        } else {
            return error{errc::bad_request, "unknown field '" + protocol::echo_safe(key) +
                                                "' (fields: code, kernel, timeout, cwd, env)"};
        }
    }
    if (!j.contains("code")) {
        return error{errc::bad_request, "field 'code' is required"};
    }
    return out;
}

} // namespace kpool::serve
