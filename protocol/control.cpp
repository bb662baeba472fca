// Control protocol v1: request validation and reply encoding.
#include "protocol/control.hpp"

#include <algorithm>
#include <cmath>
#include <initializer_list>

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

status only_fields(const json& body, std::initializer_list<std::string_view> allowed) {
    for (const auto& [key, value] : body.items()) {
        if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
            return bad("unknown field '" + echo_safe(key) + "'");
        }
    }
    return ok_status();
}

// "history": "memory" or "file" (the default).
result<bool> memory_history_field(const json& body) {
    auto it = body.find("history");
    if (it == body.end()) {
        return false;
    }
    if (!it->is_string() || (*it != "memory" && *it != "file")) {
        return bad("field 'history' must be \"memory\" or \"file\"");
    }
    return *it == "memory";
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

std::string dump_json(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

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
        if (it != body.end() && (it->is_number_integer() ||
                                 (it->is_string() && it->get_ref<const std::string&>().size() <=
                                                         max_echo_bytes))) {
            return *it;
        }
    }
    return nullptr;
}

namespace {
result<double> lease_seconds(const json& v) {
    if (!v.is_number() || !std::isfinite(v.get<double>()) || v.get<double>() <= 0 || v.get<double>() > max_lease_s) {
        return bad("field 'lease_s' must be a number above 0 and at most 31536000");
    }
    return v.get<double>();
}

// cwd and env, as acquire and context take them.
status parse_context_fields(const json& body, std::optional<std::string>& cwd,
                            std::map<std::string, std::string>& env) {
    if (auto it = body.find("cwd"); it != body.end() && !it->is_null()) {
        if (!it->is_string() || it->get_ref<const std::string&>().empty() ||
            it->get_ref<const std::string&>()[0] != '/') {
            return bad("field 'cwd' must be an absolute path");
        }
        cwd = it->get<std::string>();
    }
    if (auto it = body.find("env"); it != body.end() && !it->is_null()) {
        if (!it->is_object()) {
            return bad("field 'env' must be an object of strings");
        }
        for (const auto& [name, value] : it->items()) {
            if (name.empty() || name.find('=') != std::string::npos || !value.is_string()) {
                return bad("field 'env': '" + echo_safe(name) +
                           "' must be a name without '=' with a string value");
            }
            env.emplace(name, value.get<std::string>());
        }
    }
    return ok_status();
}
} // namespace

result<acquire_args> parse_acquire(const json& body) {
    if (auto st = only_fields(body, {"op", "req_id", "pool", "timeout_ms", "lease_s", "cwd", "env", "history"});
        !st) {
        return st.err();
    }
    acquire_args args;
    auto pool = required_string(body, "pool");
    if (!pool) {
        return pool.err();
    }
    args.pool = std::move(*pool);
    if (auto it = body.find("timeout_ms"); it != body.end()) {
        if (!it->is_number_integer() || it->get<std::int64_t>() < 0 ||
            it->get<std::int64_t>() > max_timeout_ms) {
            return bad("field 'timeout_ms' must be an integer from 0 to " +
                       std::to_string(max_timeout_ms));
        }
        args.timeout_ms = it->get<std::int64_t>();
    }
    if (auto it = body.find("lease_s"); it != body.end()) {
        auto lease = lease_seconds(*it);
        if (!lease) {
            return lease.err();
        }
        args.lease_s = *lease;
    }
    if (auto st = parse_context_fields(body, args.cwd, args.env); !st) {
        return st.err();
    }
    auto history = memory_history_field(body);
    if (!history) {
        return history.err();
    }
    args.memory_history = *history;
    return args;
}

result<kernel_args> parse_kernel_op(const json& body) {
    if (auto st = only_fields(body, {"op", "req_id", "kernel_id"}); !st) {
        return st.err();
    }
    auto id = required_string(body, "kernel_id");
    if (!id) {
        return id.err();
    }
    return kernel_args{std::move(*id)};
}

result<signal_args> parse_signal(const json& body) {
    if (auto st = only_fields(body, {"op", "req_id", "kernel_id", "signum"}); !st) {
        return st.err();
    }
    auto id = required_string(body, "kernel_id");
    if (!id) {
        return id.err();
    }
    auto it = body.find("signum");
    if (it == body.end() || !it->is_number_integer() || it->get<std::int64_t>() < 1 ||
        it->get<std::int64_t>() > 64) {
        return bad("field 'signum' must be a signal number from 1 to 64");
    }
    return signal_args{std::move(*id), static_cast<int>(it->get<std::int64_t>())};
}

result<renew_args> parse_renew(const json& body) {
    if (auto st = only_fields(body, {"op", "req_id", "kernel_id", "lease_s"}); !st) {
        return st.err();
    }
    auto id = required_string(body, "kernel_id");
    if (!id) {
        return id.err();
    }
    auto it = body.find("lease_s");
    if (it == body.end()) {
        return bad("missing field 'lease_s'");
    }
    auto lease = lease_seconds(*it);
    if (!lease) {
        return lease.err();
    }
    return renew_args{std::move(*id), *lease};
}

result<context_args> parse_context(const json& body) {
    if (auto st = only_fields(body, {"op", "req_id", "kernel_id", "cwd", "env", "history"}); !st) {
        return st.err();
    }
    auto id = required_string(body, "kernel_id");
    if (!id) {
        return id.err();
    }
    context_args args{std::move(*id), std::nullopt, {}, false};
    if (auto st = parse_context_fields(body, args.cwd, args.env); !st) {
        return st.err();
    }
    auto history = memory_history_field(body);
    if (!history) {
        return history.err();
    }
    args.memory_history = *history;
    if (!args.cwd && args.env.empty() && !args.memory_history) {
        return bad("give 'cwd', 'env' or 'history'");
    }
    return args;
}

result<pool_args> parse_resize(const json& body) {
    if (auto st = only_fields(body, {"op", "req_id", "pool", "size"}); !st) {
        return st.err();
    }
    auto name = required_string(body, "pool");
    if (!name) {
        return name.err();
    }
    auto it = body.find("size");
    if (it == body.end() || !it->is_number_integer() || it->get<std::int64_t>() < 0 ||
        it->get<std::int64_t>() > 4096) {
        return bad("field 'size' must be an integer from 0 to 4096");
    }
    return pool_args{std::move(*name), static_cast<int>(it->get<std::int64_t>())};
}

result<pool_args> parse_drain(const json& body) {
    if (auto st = only_fields(body, {"op", "req_id", "pool"}); !st) {
        return st.err();
    }
    auto name = required_string(body, "pool");
    if (!name) {
        return name.err();
    }
    return pool_args{std::move(*name), std::nullopt};
}

status parse_no_args(const json& body) { return only_fields(body, {"op", "req_id"}); }

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
