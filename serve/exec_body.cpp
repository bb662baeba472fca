// The request bodies: JSON (or a query string) in, checked fields or the reason they are not.
#include "serve/exec_body.hpp"

#include "protocol/control.hpp"
#include "protocol/control_ops.hpp"
#include "protocol/python_json.hpp"
#include "protocol/text.hpp"

#include <nlohmann/json.hpp>

#include <cmath>
#include <functional>

namespace kpool::serve {
namespace {

using json = nlohmann::json;

// One of the fields both bodies share, read into `out`; an error if its value is wrong or `key`
// is none of them (nor the body's own field, `own`, which the caller reads).
status read_kernel_field(const std::string& key, const json& value, kernel_fields& out,
                         const char* own) {
    if (key == "kernel") {
        if (!value.is_string() || value.get<std::string>().empty()) {
            return error{errc::bad_request, "field 'kernel' must be a non-empty string"};
        }
        out.kernel = value.get<std::string>();
    } else if (key == "timeout") {
        if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() <= 0 ||
            value.get<double>() > protocol::max_timeout_ms / 1000.0) {
            return error{errc::bad_request,
                         "field 'timeout' must be a number of seconds above 0 and at most 3600"};
        }
        out.timeout = std::chrono::milliseconds(
            static_cast<std::int64_t>(std::ceil(value.get<double>() * 1000)));
    } else if (key == "cwd" || key == "env") {
        // The control protocol's own rules for these fields (protocol/control_ops), so a value
        // kpool serve takes is one acquire takes; null counts as absent in both.
        const protocol::field_spec& spec = key == "cwd" ? protocol::cwd_field : protocol::env_field;
        if (auto st = protocol::check_field(spec, value); !st) {
            return st;
        }
        if (key == "cwd" && value.is_string()) {
            out.cwd = value.get<std::string>();
        } else if (key == "env") {
            out.env = protocol::env_of(value);
        }
    } else {
        return error{errc::bad_request, "unknown field '" + protocol::echo_safe(key) +
                                            "' (fields: " + own + ", kernel, timeout, cwd, env)"};
    }
    return ok_status();
}

result<json> body_object(std::string_view text) {
    json j = protocol::parse_python_json_or_discarded<json>(text);
    if (j.is_discarded()) {
        return error{errc::bad_request, "the body is not JSON"};
    }
    if (!j.is_object()) {
        return error{errc::bad_request, "the body must be a JSON object"};
    }
    return j;
}

// %XX and '+' decoded, as a form-encoded query string holds them.
std::string url_decode(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
        if (s[i] == '+') {
            out += ' ';
        } else if (s[i] == '%' && i + 2 < s.size() &&
                   std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
                   std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
            out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
            i += 2;
        } else {
            out += s[i];
        }
    }
    return out;
}

} // namespace

void for_each_query_pair(std::string_view query,
                         const std::function<void(const std::string&, const std::string&)>& fn) {
    std::size_t at = 0;
    while (at < query.size()) {
        const std::size_t end = std::min(query.find('&', at), query.size());
        const std::string_view pair = query.substr(at, end - at);
        at = end + 1;
        if (!pair.empty()) {
            const std::size_t eq = pair.find('=');
            fn(url_decode(pair.substr(0, eq)),
               eq == std::string_view::npos ? "" : url_decode(pair.substr(eq + 1)));
        }
    }
}

result<exec_body> parse_exec_body(std::string_view text) {
    auto j = body_object(text);
    if (!j) {
        return j.err();
    }
    exec_body out;
    for (const auto& [key, value] : j->items()) {
        if (key == "code") {
            if (!value.is_string()) {
                return error{errc::bad_request, "field 'code' must be a string"};
            }
            out.code = value.get<std::string>();
            continue;
        }
        if (auto st = read_kernel_field(key, value, out.kernel, "code"); !st) {
            return st.err();
        }
    }
    if (!j->contains("code")) {
        return error{errc::bad_request, "field 'code' is required"};
    }
    return out;
}

result<run_body> parse_run_body(std::string_view text, bool uploaded) {
    run_body out;
    if (!uploaded && text.find_first_not_of(" \t\r\n") == std::string_view::npos) {
        return out; // no body: no parameters
    }
    auto j = body_object(text);
    if (!j) {
        return j.err();
    }
    for (const auto& [key, value] : j->items()) {
        if (key == "parameters") {
            if (!value.is_object()) {
                return error{errc::bad_request, "field 'parameters' must be an object"};
            }
            // In the caller's order (the injected cell's order): read again, order kept.
            out.parameters = protocol::parse_python_json<params::parameters>(text)["parameters"];
            continue;
        }
        if (key == "report_mode") {
            if (!value.is_boolean()) {
                return error{errc::bad_request, "field 'report_mode' must be true or false"};
            }
            out.report_mode = value.get<bool>();
            continue;
        }
        if (key == "notebook" && uploaded) {
            if (!value.is_object()) {
                return error{errc::bad_request,
                             "field 'notebook' must be a notebook (a JSON object)"};
            }
            out.notebook = value.dump();
            continue;
        }
        if (auto st = read_kernel_field(key, value, out.kernel,
                                        uploaded ? "notebook, parameters, report_mode"
                                                 : "parameters, report_mode");
            !st) {
            return st.err();
        }
    }
    if (uploaded && out.notebook.empty()) {
        return error{errc::bad_request,
                     "field 'notebook' is required (POST /v1/run/{path} runs one under --root)"};
    }
    return out;
}

status apply_format(std::string_view query, run_body& body) {
    status outcome = ok_status();
    for_each_query_pair(query, [&](const std::string& name, const std::string& value) {
        if (name == "format" && outcome) {
            if (value != "outputs" && value != "notebook") {
                outcome = error{errc::bad_request, "format must be 'outputs' or 'notebook', not '" +
                                                       protocol::echo_safe(value) + "'"};
            }
            body.outputs_only = value == "outputs";
        }
    });
    return outcome;
}

result<run_body> parse_run_query(std::string_view query) {
    run_body out;
    status outcome = ok_status();
    for_each_query_pair(query, [&](const std::string& name, const std::string& value) {
        if (name.empty()) {
            outcome = error{errc::bad_request, "a query parameter without a name"};
        } else if (name == "kernel") { // reserved, as format: the kernel to run on
            if (value.empty()) {
                outcome = error{errc::bad_request, "'kernel' must name a pool or a kernelspec"};
            }
            out.kernel.kernel = value;
        } else if (name != "format") {
            out.parameters[name] = params::resolve_cli_value(value);
        }
    });
    if (!outcome) {
        return outcome.err();
    }
    if (auto st = apply_format(query, out); !st) {
        return st.err();
    }
    return out;
}

} // namespace kpool::serve
