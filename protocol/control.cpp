// Control protocol v1: request validation and reply encoding.
#include "protocol/control.hpp"

#include "protocol/control_ops.hpp"

#include <algorithm>

namespace kpool::protocol {
namespace {

using json = nlohmann::json;

error bad(std::string message) { return {errc::bad_request, std::move(message)}; }

// Nesting depth of JSON text, counting brackets outside strings. Checked before parsing so a
// hostile "[[[[..." never reaches the parser's or destructor's recursion.
int nesting_depth(std::string_view text) {
    int depth = 0;
    int deepest = 0;
    bool in_string = false;
    bool escaped = false;
    for (char c : text) {
        if (in_string) {
            if (escaped) {
                escaped = false;
            } else if (c == '\\') {
                escaped = true;
            } else if (c == '"') {
                in_string = false;
            }
            continue;
        }
        if (c == '"') {
            in_string = true;
        } else if (c == '[' || c == '{') {
            deepest = std::max(deepest, ++depth);
        } else if (c == ']' || c == '}') {
            --depth;
        }
    }
    return deepest;
}

result<std::string> required_string(const json& body, const char* name) {
    auto it = body.find(name);
    if (it == body.end()) {
        return bad(std::string("missing field '") + name + "'");
    }
    if (!it->is_string() || it->get_ref<const std::string&>().empty()) {
        return bad(std::string("field '") + name + "' must be a non-empty string");
    }
    return it->get<std::string>();
}

} // namespace

std::string dump_json(const json& j) {
    return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string echo_safe(std::string_view user_text) {
    std::string out;
    const std::size_t n = std::min(user_text.size(), max_echo_bytes);
    out.reserve(n + 3);
    for (std::size_t i = 0; i < n; ++i) {
        const auto c = static_cast<unsigned char>(user_text[i]);
        out.push_back(c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c));
    }
    if (user_text.size() > n) {
        out += "...";
    }
    return out; // invalid UTF-8 left here is replaced when the reply is dumped
}

result<control_request> parse_control_request(std::string_view bytes) {
    if (bytes.empty()) {
        return bad("empty request");
    }
    if (static_cast<std::int64_t>(bytes.size()) > max_request_bytes) {
        return bad("request larger than " + std::to_string(max_request_bytes) + " bytes");
    }
    if (nesting_depth(bytes) > max_request_depth) {
        return bad("request nests deeper than " + std::to_string(max_request_depth) + " levels");
    }
    json body = json::parse(bytes, nullptr, /*allow_exceptions=*/false);
    if (body.is_discarded()) {
        return bad("request is not valid JSON (UTF-8): '" + echo_safe(bytes) + "'");
    }
    if (!body.is_object()) {
        return bad("request must be a JSON object");
    }
    control_request req;
    if (auto it = body.find("req_id"); it != body.end()) {
        if (!it->is_string() && !it->is_number_integer()) {
            return bad("field 'req_id' must be a string or an integer");
        }
        if (it->is_string() && it->get_ref<const std::string&>().size() > max_echo_bytes) {
            return bad("field 'req_id' longer than " + std::to_string(max_echo_bytes) + " bytes");
        }
        req.req_id = *it;
    }
    auto op = required_string(body, "op");
    if (!op) {
        return op.err();
    }
    req.op = std::move(*op);
    req.body = std::move(body);
    return req;
}

json salvage_req_id(std::string_view bytes) {
    if (static_cast<std::int64_t>(bytes.size()) > max_request_bytes ||
        nesting_depth(bytes) > max_request_depth) {
        return nullptr;
    }
    json body = json::parse(bytes, nullptr, false);
    if (body.is_object()) {
        auto it = body.find("req_id");
        if (it != body.end() &&
            (it->is_number_integer() ||
             (it->is_string() && it->get_ref<const std::string&>().size() <= max_echo_bytes))) {
            return *it;
        }
    }
    return nullptr;
}

namespace {
// The checked body of `op`, or why it fails its op's table row.
status check_op(std::string_view op, const json& body) {
    const op_spec* spec = find_control_op(op);
    return spec != nullptr ? check_fields(*spec, body) : status(bad("unknown op"));
}

std::optional<std::string> optional_path(const json& body, const char* name) {
    auto it = body.find(name);
    if (it == body.end() || it->is_null()) {
        return std::nullopt;
    }
    return it->get<std::string>();
}

std::map<std::string, std::string> env_field_of(const json& body) {
    auto it = body.find("env");
    return it == body.end() ? std::map<std::string, std::string>{} : env_of(*it);
}

bool memory_history(const json& body) { return body.value("history", "file") == "memory"; }
} // namespace

// Each parser: the op's table row checks the body; what is read here is already valid.
result<acquire_args> parse_acquire(const json& body) {
    if (auto st = check_op("acquire", body); !st) {
        return st.err();
    }
    acquire_args args;
    args.pool = body.at("pool").get<std::string>();
    if (auto it = body.find("timeout_ms"); it != body.end()) {
        args.timeout_ms = it->get<std::int64_t>();
    }
    if (auto it = body.find("lease_s"); it != body.end()) {
        args.lease_s = it->get<double>();
    }
    args.cwd = optional_path(body, "cwd");
    args.env = env_field_of(body);
    args.memory_history = memory_history(body);
    return args;
}

result<kernel_args> parse_kernel_op(const json& body) {
    if (auto st = check_op("release", body); !st) { // release and poll take the same fields
        return st.err();
    }
    return kernel_args{body.at("kernel_id").get<std::string>()};
}

result<signal_args> parse_signal(const json& body) {
    if (auto st = check_op("signal", body); !st) {
        return st.err();
    }
    return signal_args{body.at("kernel_id").get<std::string>(), body.at("signum").get<int>()};
}

result<renew_args> parse_renew(const json& body) {
    if (auto st = check_op("renew", body); !st) {
        return st.err();
    }
    return renew_args{body.at("kernel_id").get<std::string>(), body.at("lease_s").get<double>()};
}

result<context_args> parse_context(const json& body) {
    if (auto st = check_op("context", body); !st) {
        return st.err();
    }
    context_args args{body.at("kernel_id").get<std::string>(), optional_path(body, "cwd"),
                      env_field_of(body), memory_history(body)};
    if (!args.cwd && args.env.empty() && !args.memory_history) {
        return bad("give 'cwd', 'env' or 'history'");
    }
    return args;
}

result<pool_args> parse_resize(const json& body) {
    if (auto st = check_op("resize", body); !st) {
        return st.err();
    }
    return pool_args{body.at("pool").get<std::string>(), body.at("size").get<int>()};
}

result<pool_args> parse_drain(const json& body) {
    if (auto st = check_op("drain", body); !st) {
        return st.err();
    }
    return pool_args{body.at("pool").get<std::string>(), std::nullopt};
}

status parse_no_args(const json& body) { return check_op("ping", body); }

std::string make_ok_reply(json fields, const json& req_id) {
    fields["ok"] = true;
    if (!req_id.is_null()) {
        fields["req_id"] = req_id;
    }
    return dump_json(fields);
}

std::string make_error_reply(const error& err, const json& req_id) {
    json reply{{"ok", false}, {"error", {{"code", to_string(err.code)}, {"message", err.message}}}};
    if (!req_id.is_null()) {
        reply["req_id"] = req_id;
    }
    return dump_json(reply);
}

} // namespace kpool::protocol

namespace kpool {
const char* to_string(errc code) noexcept {
    switch (code) {
    case errc::bad_request: return "bad_request";
    case errc::unknown_op: return "unknown_op";
    case errc::unknown_pool: return "unknown_pool";
    case errc::unknown_kernel: return "unknown_kernel";
    case errc::timeout: return "timeout";
    case errc::capacity: return "capacity";
    case errc::unavailable: return "unavailable";
    case errc::shutting_down: return "shutting_down";
    case errc::internal: return "internal";
    }
    return "internal";
}
} // namespace kpool
