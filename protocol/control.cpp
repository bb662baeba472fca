// Control protocol v1: request validation and reply encoding.
#include "protocol/control.hpp"

#include "protocol/control_ops.hpp"
#include "protocol/op_table.hpp"
#include "protocol/text.hpp"

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

result<context_args> parse_context(const json& body) {
    auto args = read_request(ops::context, body);
    if (args && !args->cwd && args->env.empty() && !args->memory_history) {
        return bad("give 'cwd', 'env' or 'history'");
    }
    return args;
}

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
