// Readers of control replies.
#include "protocol/control_replies.hpp"

#include <array>
#include <utility>

namespace kpool::protocol {
namespace {

using json = nlohmann::json;

constexpr std::array all_codes = {errc::bad_request,    errc::unknown_op,    errc::unknown_pool,
                                  errc::unknown_kernel, errc::timeout,       errc::capacity,
                                  errc::unavailable,    errc::shutting_down, errc::internal};

template <class T>
T field_or(const json& object, const char* name, T fallback) {
    auto it = object.find(name);
    if (it == object.end() || it->is_null()) {
        return fallback;
    }
    try {
        return it->get<T>();
    } catch (const json::exception&) {
        return fallback;
    }
}

} // namespace

std::optional<errc> errc_from_string(std::string_view name) {
    for (errc code : all_codes) {
        if (name == to_string(code)) {
            return code;
        }
    }
    return std::nullopt;
}

std::optional<error> refusal_of(const json& reply) {
    if (!reply.is_object()) {
        return error{errc::internal, "kpoold's reply is not a JSON object"};
    }
    if (field_or(reply, "ok", false)) {
        return std::nullopt;
    }
    json err = field_or(reply, "error", json::object());
    if (!err.is_object()) {
        err = json::object();
    }
    return error{errc_from_string(field_or<std::string>(err, "code", "")).value_or(errc::internal),
                 field_or<std::string>(err, "message", "kpoold refused")};
}

result<acquired_kernel> read_acquire_reply(const json& reply) {
    if (auto refused = refusal_of(reply)) {
        return std::move(*refused);
    }
    acquired_kernel k;
    k.kernel_id = field_or<std::string>(reply, "kernel_id", "");
    if (k.kernel_id.empty()) {
        return error{errc::internal, "kpoold's acquire reply has no kernel_id"};
    }
    k.pool = field_or<std::string>(reply, "pool", "");
    k.connection_file = field_or<std::string>(reply, "connection_file", "");
    k.pid = field_or<std::int64_t>(reply, "pid", 0);
    k.pool_warm = field_or(reply, "pool_warm", 0);
    k.connection = connection_info_from_json(field_or(reply, "connection", json::object()));
    return k;
}

result<kernel_poll> read_poll_reply(const json& reply) {
    if (auto refused = refusal_of(reply)) {
        return std::move(*refused);
    }
    kernel_poll p;
    p.alive = field_or(reply, "alive", true);
    if (!p.alive && reply.contains("exit_code") && reply["exit_code"].is_number_integer()) {
        p.exit_code = reply["exit_code"].get<int>();
    }
    p.reason = field_or<std::string>(reply, "reason", "");
    return p;
}

result<std::vector<pool_summary>> read_status_pools(const json& reply) {
    if (auto refused = refusal_of(reply)) {
        return std::move(*refused);
    }
    std::vector<pool_summary> pools;
    const json list = field_or(reply, "pools", json::array());
    if (!list.is_array()) {
        return error{errc::internal, "kpoold's status has no list of pools"};
    }
    for (const json& p : list) {
        if (!p.is_object()) {
            continue;
        }
        pool_summary s;
        s.name = field_or<std::string>(p, "name", "");
        s.kernelspec = field_or<std::string>(p, "kernelspec", s.name);
        s.size = field_or(p, "size", 0);
        s.warm = field_or(p, "warm", 0);
        s.starting = field_or(p, "starting", 0);
        s.leased = field_or(p, "leased", 0);
        s.failing = field_or(p, "failing", false);
        s.drained = field_or(p, "drained", false);
        s.removed = field_or(p, "removed", false);
        s.language = field_or<std::string>(p, "language", "");
        s.sandboxed = field_or<std::string>(p, "isolation", "none") == "sandbox";
        const json recent = field_or(p, "recent", json::object());
        if (recent.is_object() && recent.contains("time_to_warm_s_p50") &&
            recent["time_to_warm_s_p50"].is_number()) {
            s.time_to_warm_s_p50 = recent["time_to_warm_s_p50"].get<double>();
        }
        pools.push_back(std::move(s));
    }
    return pools;
}

} // namespace kpool::protocol
