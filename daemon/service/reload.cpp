// Live reconfiguration: SIGHUP re-reads the config file and applies what changed (the resize
// and drain ops live with the other ops, in request_handlers.cpp). Nothing here drops a leased
// kernel: pools that shrink or go stop unleased kernels only.
#include "daemon/service/daemon.hpp"

#include "config/config_keys.hpp"
#include "loop/logging.hpp"

namespace kpool::daemon {

std::optional<std::string> daemon::needs_restart(const config::daemon_config& next) const {
    if (auto key = config::changed_daemon_key(m_cfg.daemon, next, config::reload_effect::restart)) {
        return "[daemon] " + std::string(*key) + " changed, and it takes a restart to change it";
    }
    return std::nullopt;
}

void daemon::reload() {
    auto log = loop::logger("daemon");
    if (m_config_path.empty()) {
        log->warn("SIGHUP: running on the embedded default config, there is no file to re-read");
        return;
    }
    m_notify.send("RELOADING=1");
    auto next = config::load_config_file(m_config_path);
    std::optional<std::string> refusal;
    if (!next) {
        refusal = next.err().message;
    } else {
        refusal = needs_restart(next->daemon);
    }
    if (refusal) {
        log->error("config not reloaded, still running the previous one: {}", *refusal);
        m_notify.send("READY=1");
        return;
    }
    loop::set_log_level(next->daemon.log_level);
    m_budget.max = next->daemon.max_kernels;
    use_kernel_ports(next->daemon);
    // Kernelspecs are read again too: an edited kernel.json replaces the unleased kernels.
    const std::set<std::string> specs_changed = resolve_kernelspecs(*next);
    const auto now = clock::now();
    for (auto it = m_pools.begin(); it != m_pools.end();) {
        if (next->find_pool(it->first) != nullptr) {
            ++it;
            continue;
        }
        it->second->retire(now);
        m_launchers->retire(it->first);
        m_learning->forget(it->first);
        if (!it->second->empty()) {
            m_removed_pools.push_back(std::move(it->second)); // leased kernels run on
        } else if (m_metrics) {
            m_metrics->forget(it->first);
        }
        it = m_pools.erase(it);
    }
    for (const config::pool_config& pc : next->pools) {
        auto it = m_pools.find(pc.name);
        if (it == m_pools.end()) {
            m_launchers->configure(pc, kernelspec_of(pc),
                                   m_learning->configure(pc, pool_environment(pc)));
            log->info("pool {} added: size {}", pc.name, pc.size);
            m_pools.emplace(pc.name, make_pool(pc)).first->second->refill(now);
            continue;
        }
        // Only a change to what kernels are started with replaces warm kernels (and a fork
        // pool's zygote: the old one lives on until its kernels are gone). A resize, a new
        // lease or timeout keeps both: the warm kernels are what the new config would start.
        // Which keys do which is their rows' reload column (config/config_keys.hpp).
        const config::pool_config& was = it->second->config();
        const auto replaced_by =
            config::changed_pool_key(was, pc, config::reload_effect::replace_kernels);
        const bool replace = specs_changed.count(pc.name) != 0 || replaced_by.has_value();
        if (replaced_by) {
            log->info("pool {}: '{}' changed, so its warm kernels are replaced", pc.name,
                      *replaced_by);
        }
        const auto plan = m_learning->configure(pc, pool_environment(pc));
        if (replace) {
            m_launchers->configure(pc, kernelspec_of(pc), plan);
        } else if (config::changed_pool_key(was, pc, config::reload_effect::rebuild_zygote)) {
            m_launchers->rebuild(pc.name,
                                 plan); // the kernels stay: only what their zygote holds changes
        }
        if (replace || !(it->second->config() == pc)) {
            it->second->reconfigure(pc, replace, now);
        }
    }
    m_cfg = std::move(next).value();
    log->info("config reloaded from {}: {} pool(s), max_kernels {}", m_config_path, m_pools.size(),
              m_budget.max);
    m_notify.send("READY=1");
    reschedule();
}

} // namespace kpool::daemon
