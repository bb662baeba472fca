// Live reconfiguration: SIGHUP re-reads the config file and applies what changed (the resize
// and drain ops live with the other ops, in request_handlers.cpp). Nothing here drops a leased
// kernel: pools that shrink or go stop unleased kernels only.
#include "daemon/service/daemon.hpp"

#include "loop/logging.hpp"

namespace kpool::daemon {
namespace {

// Settings a running daemon cannot take over: they shape the control socket and the runtime
// directory it has already bound and locked.
std::optional<std::string> changed_socket_setting(const config::daemon_config& now,
                                                  const config::daemon_config& next) {
    if (now.control != next.control) return "control";
    if (now.runtime_dir != next.runtime_dir) return "runtime_dir";
    if (now.allowed_uids != next.allowed_uids) return "allowed_uids";
    if (now.allowed_gids != next.allowed_gids) return "allowed_gids";
    if (now.curve_secret_key_file != next.curve_secret_key_file) return "curve_secret_key_file";
    if (now.curve_allowed_keys != next.curve_allowed_keys) return "curve_allowed_keys";
    if (now.metrics != next.metrics) return "metrics";
    return std::nullopt;
}

// Warm kernels started under `old` are not what `next` would start (another kernelspec,
// transport, ip, limits, startup_code, launcher, python or priming). Sizes, timeouts, leases
// and the rest leave them as they are.
bool kernels_differ(const config::pool_config& old, const config::pool_config& next) {
    return old.kernelspec != next.kernelspec || old.transport != next.transport ||
           old.ip != next.ip || old.limits != next.limits || old.startup_code != next.startup_code ||
           old.launcher != next.launcher || old.python != next.python || old.prime != next.prime;
}

} // namespace

std::optional<std::string> daemon::needs_restart(const config::daemon_config& next) const {
    if (auto key = changed_socket_setting(m_cfg.daemon, next)) {
        return "[daemon] " + *key + " changed, and it takes a restart to change it";
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
            m_launchers->configure(pc, kernelspec_of(pc), m_learning->configure(pc, pool_environment(pc)));
            log->info("pool {} added: size {}", pc.name, pc.size);
            m_pools.emplace(pc.name, make_pool(pc)).first->second->refill(now);
            continue;
        }
        // Only a change to what kernels are started with replaces warm kernels (and a fork
        // pool's zygote: the old one lives on until its kernels are gone). A resize, a new
        // lease or timeout keeps both: the warm kernels are what the new config would start.
        const bool replace = specs_changed.count(pc.name) != 0 || kernels_differ(it->second->config(), pc);
        const config::pool_config& was = it->second->config();
        const auto plan = m_learning->configure(pc, pool_environment(pc));
        if (replace) {
            m_launchers->configure(pc, kernelspec_of(pc), plan);
        } else if (was.preload != pc.preload || was.preload_modules != pc.preload_modules ||
                   was.preload_max_mb != pc.preload_max_mb || was.prefault != pc.prefault) {
            m_launchers->rebuild(pc.name, plan); // the kernels stay: only what their zygote holds changes
        }
        if (replace || !(it->second->config() == pc)) {
            it->second->reconfigure(pc, replace, now);
        }
    }
    m_cfg = std::move(next).value();
    log->info("config reloaded from {}: {} pool(s), max_kernels {}", m_config_path,
              m_pools.size(), m_budget.max);
    m_notify.send("READY=1");
    reschedule();
}

} // namespace kpool::daemon
