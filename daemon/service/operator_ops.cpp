// The operator's ops (protocol/PROTOCOL.md): status and kernelspecs, which report, and resize and
// drain, which change a pool until the next reload. request_handlers.cpp dispatches them.
#include "daemon/service/daemon.hpp"

#include "daemon/core/refill_delay.hpp"
#include "daemon/service/status_json.hpp"
#include "jupyter/kernelspec.hpp"
#include "kpool/version.hpp"
#include "loop/logging.hpp"
#include "protocol/control.hpp"
#include "protocol/op_table.hpp"
#include "protocol/pool_names.hpp"

#include <algorithm>
#include <cmath>

namespace kpool::daemon {

using json = nlohmann::json;

std::string daemon::op_status(const envelope&, const protocol::control_request& req) {
    if (auto st = protocol::read_request(protocol::ops::status, req.body); !st) {
        return protocol::make_error_reply(st.err(), req.req_id);
    }
    const auto now = clock::now();
    json pools = json::array();
    json kernels = json::array();
    for_each_pool([&](pool& p) {
        json ps = pool_status_json(p, now);
        m_launchers->describe(p.config(), ps);
        ps["preload"] = m_launchers->forks(p.config().name) ? m_learning->describe(p.config().name)
                                                            : json(nullptr);
        const refill_delay delay =
            refill_delay_for(m_cfg.daemon, p.config(), m_launchers->forks(p.config().name));
        ps["refill_delay_s"] = delay.seconds;
        ps["refill_delay_why"] = delay.why(p.config().name);
        // What the pool runs, so clients (the provisioner's kernelspec) can show its language;
        // or why it cannot run anything.
        const auto& spec = kernelspec_of(p.config());
        ps["language"] = spec ? json(spec->spec.language) : json(nullptr);
        ps["display_name"] = spec ? json(spec->spec.display_name) : json(nullptr);
        ps["program"] = spec ? json(spec->program) : json(nullptr);
        ps["kernelspec_error"] = spec ? json(nullptr) : json(spec.err().message);
        ps["isolation"] = config::to_string(p.config().isolation);
        const sandbox_plan* box = sandbox_of(p.config().name);
        ps["sandbox"] = box ? box->describe(p.config().limits, m_cgroups ? m_cgroups->how() : "")
                            : json(nullptr);
        for (auto& k : ps["kernels"]) {
            kernels.push_back(std::move(k));
        }
        ps.erase("kernels");
        pools.push_back(std::move(ps));
    });
    const double uptime = std::chrono::duration<double>(now - m_started_at).count();
    return protocol::make_ok_reply(
        {{"pid", ::getpid()},
         {"host", host_name()},
         {"version", kpool::version},
         {"protocol", control_protocol_version},
         {"uptime_s", std::round(uptime * 1000) / 1000},
         {"shutting_down", m_shutting_down},
         {"max_kernels", m_budget.max},
         {"kernels_total", m_budget.used},
         {"background_priority",
          {{"on", background_priority()},
           {"why_not", background_priority()               ? json(nullptr)
                       : !m_cfg.daemon.background_priority ? json("background_priority = false")
                                                           : json(m_priority.why_not)},
           {"limit_s", m_cfg.daemon.background_limit_s},
           {"starved_starts", m_starved_starts}}},
         {"kernel_ports",
          {{"range", m_ports.range()
                         ? json(fmt::format("{}-{}", m_ports.range()->first, m_ports.range()->last))
                         : json(nullptr)},
           {"why", m_kernel_ports_why}}},
         {"pools", std::move(pools)},
         {"kernels", std::move(kernels)}},
        req.req_id);
}

std::string daemon::op_kernelspecs(const envelope&, const protocol::control_request& req) {
    if (auto st = protocol::read_request(protocol::ops::kernelspecs, req.body); !st) {
        return protocol::make_error_reply(st.err(), req.req_id);
    }
    json specs = json::array();
    for (const kernelspec& spec : jupyter::list_kernelspecs()) {
        specs.push_back({{"name", spec.name},
                         {"display_name", spec.display_name},
                         {"language", spec.language},
                         {"resource_dir", spec.resource_dir},
                         {"argv", spec.argv},
                         {"interrupt_mode", spec.interrupt_mode},
                         {"env", spec.env},
                         {"metadata", spec.metadata}});
    }
    return protocol::make_ok_reply({{"kernelspecs", std::move(specs)}}, req.req_id);
}

std::string daemon::op_resize(const envelope&, const protocol::control_request& req) {
    auto args = protocol::read_request(protocol::ops::resize, req.body);
    if (!args) {
        return protocol::make_error_reply(args.err(), req.req_id);
    }
    pool* p = active_pool(args->pool);
    if (p == nullptr) {
        return unknown_pool_reply(args->pool, req.req_id);
    }
    int others = 0;
    for (const auto& [name, other] : m_pools) {
        others += name == args->pool ? 0 : other->config().size;
    }
    if (others + *args->size > m_budget.max) {
        return protocol::make_error_reply(
            {errc::bad_request,
             fmt::format("pool sizes would add up to {}, more than max_kernels = {}",
                         others + *args->size, m_budget.max)},
            req.req_id);
    }
    const int before = p->config().size;
    p->resize(*args->size, clock::now());
    return protocol::make_ok_reply(
        {{"pool", args->pool}, {"size", *args->size}, {"previous_size", before}}, req.req_id);
}

std::string daemon::op_drain(const envelope&, const protocol::control_request& req) {
    auto args = protocol::read_request(protocol::ops::drain, req.body);
    if (!args) {
        return protocol::make_error_reply(args.err(), req.req_id);
    }
    pool* p = active_pool(args->pool);
    if (p == nullptr) {
        return unknown_pool_reply(args->pool, req.req_id);
    }
    const int before = p->config().size;
    p->drain(clock::now());
    return protocol::make_ok_reply({{"pool", args->pool}, {"size", 0}, {"previous_size", before}},
                                   req.req_id);
}

} // namespace kpool::daemon
