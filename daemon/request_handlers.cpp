// The control protocol's ops (protocol/PROTOCOL.md), dispatched through a table by op name.
#include "daemon/daemon.hpp"

#include "daemon/kernelspec.hpp"
#include "daemon/logging.hpp"
#include "kpool/version.hpp"
#include "protocol/control.hpp"

#include <unistd.h>

#include <cmath>

namespace kpool::daemon {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// Without timeout_ms an acquire waits this long for a kernel.
constexpr auto default_acquire_timeout = 30000ms;

using simple_op = std::string (daemon::*)(const protocol::control_request&);

} // namespace

void daemon::handle_request(const envelope& env, std::string_view body) {
    // Ops that answer at once; acquire is handled apart because it may answer later.
    static const std::unordered_map<std::string_view, simple_op> ops = {
        {"ping", &daemon::op_ping},
        {"status", &daemon::op_status},
        {"kernelspecs", &daemon::op_kernelspecs},
        {"release", &daemon::op_release},
    };
    auto log = logger("control");
    auto req = protocol::parse_control_request(body);
    if (!req) {
        log->warn("bad request: {}", req.err().message);
        m_control->reply(env, protocol::make_error_reply(req.err(), protocol::salvage_req_id(body)));
        return;
    }
    log->debug("request op={}", protocol::echo_safe(req->op));
    std::string reply;
    if (m_shutting_down && req->op != "ping" && req->op != "status") {
        reply = protocol::make_error_reply({errc::shutting_down, "the daemon is shutting down"},
                                           req->req_id);
    } else if (req->op == "acquire") {
        reply = op_acquire(env, *req);
    } else if (auto it = ops.find(req->op); it != ops.end()) {
        reply = (this->*(it->second))(*req);
    } else {
        reply = protocol::make_error_reply(
            {errc::unknown_op, "unknown op '" + protocol::echo_safe(req->op) +
                                   "' (known: ping, acquire, release, status, kernelspecs)"},
            req->req_id);
    }
    if (!reply.empty()) {
        m_control->reply(env, reply);
    }
    reschedule();
}

std::string daemon::op_ping(const protocol::control_request& req) {
    if (auto st = protocol::parse_no_args(req.body); !st) {
        return protocol::make_error_reply(st.err(), req.req_id);
    }
    return protocol::make_ok_reply(
        {{"protocol", control_protocol_version}, {"version", kpool::version}}, req.req_id);
}

json daemon::acquire_reply_fields(const kernel_entry& kernel) const {
    return {{"kernel_id", kernel.id},
            {"pool", kernel.pool},
            {"pid", kernel.pid},
            {"connection", to_json(kernel.connection)},
            {"connection_file", kernel.connection_file}};
}

std::string daemon::op_acquire(const envelope& env, const protocol::control_request& req) {
    auto args = protocol::parse_acquire(req.body);
    if (!args) {
        return protocol::make_error_reply(args.err(), req.req_id);
    }
    auto it = m_pools.find(args->pool);
    if (it == m_pools.end()) {
        return protocol::make_error_reply(
            {errc::unknown_pool, "no pool named '" + protocol::echo_safe(args->pool) + "'"},
            req.req_id);
    }
    pool& p = *it->second;
    const auto timeout =
        args->timeout_ms ? std::chrono::milliseconds(*args->timeout_ms) : default_acquire_timeout;
    const waiter_id waiter = m_next_waiter++;
    const auto now = clock::now();
    // Registered before asking the pool, which may answer through granted() right away.
    m_pending.emplace(waiter, pending_acquire{env, req.req_id, args->pool, now});
    auto outcome = p.acquire(waiter, timeout, args->lease_s, now);
    if (std::holds_alternative<acquire_queued>(outcome)) {
        return {}; // answered by granted() or failed()
    }
    m_pending.erase(waiter);
    if (auto* err = std::get_if<error>(&outcome)) {
        return protocol::make_error_reply(*err, req.req_id);
    }
    const kernel_entry& kernel = *std::get<const kernel_entry*>(outcome);
    const std::string reply = protocol::make_ok_reply(acquire_reply_fields(kernel), req.req_id);
    if (!m_control->reply(env, reply)) {
        p.return_unseen(kernel.id, now);
    } else {
        logger("pool")->info("kernel leased id={} pool={} pid={} waited_ms=0", kernel.id,
                             kernel.pool, kernel.pid);
    }
    p.refill(now); // after the reply is on its way
    return {};
}

std::string daemon::op_release(const protocol::control_request& req) {
    auto args = protocol::parse_release(req.body);
    if (!args) {
        return protocol::make_error_reply(args.err(), req.req_id);
    }
    pool* p = pool_of_kernel(args->kernel_id);
    if (p == nullptr) {
        return protocol::make_error_reply(
            {errc::unknown_kernel, "no kernel '" + protocol::echo_safe(args->kernel_id) + "'"},
            req.req_id);
    }
    if (auto st = p->release(args->kernel_id); !st) {
        return protocol::make_error_reply(st.err(), req.req_id);
    }
    return protocol::make_ok_reply(json::object(), req.req_id);
}

std::string daemon::op_status(const protocol::control_request& req) {
    if (auto st = protocol::parse_no_args(req.body); !st) {
        return protocol::make_error_reply(st.err(), req.req_id);
    }
    const auto now = clock::now();
    json pools = json::array();
    json kernels = json::array();
    for (const auto& [name, p] : m_pools) {
        json ps = p->status_json(now);
        for (auto& k : ps["kernels"]) {
            kernels.push_back(std::move(k));
        }
        ps.erase("kernels");
        pools.push_back(std::move(ps));
    }
    const double uptime = std::chrono::duration<double>(now - m_started_at).count();
    return protocol::make_ok_reply({{"pid", ::getpid()},
                                    {"version", kpool::version},
                                    {"protocol", control_protocol_version},
                                    {"uptime_s", std::round(uptime * 1000) / 1000},
                                    {"shutting_down", m_shutting_down},
                                    {"max_kernels", m_budget.max},
                                    {"kernels_total", m_budget.used},
                                    {"pools", std::move(pools)},
                                    {"kernels", std::move(kernels)}},
                                   req.req_id);
}

std::string daemon::op_kernelspecs(const protocol::control_request& req) {
    if (auto st = protocol::parse_no_args(req.body); !st) {
        return protocol::make_error_reply(st.err(), req.req_id);
    }
    json specs = json::array();
    for (const kernelspec& spec : list_kernelspecs()) {
        specs.push_back({{"name", spec.name},
                         {"display_name", spec.display_name},
                         {"language", spec.language},
                         {"resource_dir", spec.resource_dir},
                         {"argv", spec.argv}});
    }
    return protocol::make_ok_reply({{"kernelspecs", std::move(specs)}}, req.req_id);
}

} // namespace kpool::daemon
