// Typed builders of control requests.
#include "protocol/control_requests.hpp"

namespace kpool::protocol::requests {
namespace {

using json = nlohmann::json;

json op(std::string_view name) { return {{"op", name}}; }

json about_kernel(std::string_view name, std::string_view kernel_id) {
    json r = op(name);
    r["kernel_id"] = kernel_id;
    return r;
}

// cwd, env and history, as acquire and context carry them.
void put_context(json& r, const std::optional<std::string>& cwd,
                 const std::map<std::string, std::string>& env, bool memory_history) {
    if (cwd) {
        r["cwd"] = *cwd;
    }
    if (!env.empty()) {
        r["env"] = env;
    }
    if (memory_history) {
        r["history"] = "memory";
    }
}

} // namespace

json ping() { return op("ping"); }
json status() { return op("status"); }
json kernelspecs() { return op("kernelspecs"); }

json acquire(const acquire_args& args) {
    json r = op("acquire");
    r["pool"] = args.pool;
    if (args.timeout_ms) {
        r["timeout_ms"] = *args.timeout_ms;
    }
    if (args.lease_s) {
        r["lease_s"] = *args.lease_s;
    }
    put_context(r, args.cwd, args.env, args.memory_history);
    return r;
}

json release(std::string_view kernel_id) { return about_kernel("release", kernel_id); }
json poll(std::string_view kernel_id) { return about_kernel("poll", kernel_id); }

json renew(std::string_view kernel_id, double lease_s) {
    json r = about_kernel("renew", kernel_id);
    r["lease_s"] = lease_s;
    return r;
}

json signal(std::string_view kernel_id, int signum) {
    json r = about_kernel("signal", kernel_id);
    r["signum"] = signum;
    return r;
}

json context(const context_args& args) {
    json r = about_kernel("context", args.kernel_id);
    put_context(r, args.cwd, args.env, args.memory_history);
    return r;
}

json resize(std::string_view pool, std::int64_t size) {
    json r = op("resize");
    r["pool"] = pool;
    r["size"] = size;
    return r;
}

json drain(std::string_view pool) {
    json r = op("drain");
    r["pool"] = pool;
    return r;
}

std::string_view op_of(const json& request) {
    auto it = request.find("op");
    return it != request.end() && it->is_string()
               ? std::string_view(it->get_ref<const std::string&>())
               : std::string_view();
}

} // namespace kpool::protocol::requests
