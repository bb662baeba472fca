// What a pool's kernels run: its kernelspec, resolved at start and on reload (no file I/O per
// kernel start), and for a sandboxed pool its sandbox's plan, made from it then too. Where
// kernels come from is launcher_registry's.
#include "daemon/service/daemon.hpp"

#include "loop/logging.hpp"

#include <filesystem>

namespace kpool::daemon {

std::set<std::string> daemon::resolve_kernelspecs(const config::config& cfg) {
    std::set<std::string> changed;
    std::map<std::string, result<resolved_kernelspec>> specs;
    std::map<std::string, sandbox_plan> sandboxes;
    // kpool's own paths, hidden in every sandbox even where a bound path holds them.
    std::vector<std::string> hidden = {cfg.daemon.runtime_dir, cfg.daemon.state_dir};
    if (!m_config_path.empty()) {
        hidden.push_back(std::filesystem::absolute(m_config_path).parent_path().string());
    }
    if (!cfg.daemon.curve_secret_key_file.empty()) {
        hidden.push_back(cfg.daemon.curve_secret_key_file);
    }
    for (const auto& pc : cfg.pools) {
        auto spec = jupyter::resolve_pool_kernelspec(pc.kernelspec, pc.python);
        if (!spec) {
            loop::logger("daemon")->error("{}: pool '{}': {}", pc.kernelspec_at, pc.name,
                                          spec.err().message);
        }
        auto old = m_specs.find(pc.name);
        if (old != m_specs.end() && old->second && spec && !(*old->second == *spec)) {
            changed.insert(pc.name);
        }
        if (spec && pc.isolation == config::isolation_kind::sandbox) {
            sandbox_plan plan = plan_sandbox(pc, *spec, hidden);
            if (!plan.problem.empty()) {
                loop::logger("daemon")->error("pool '{}': cannot sandbox its kernels: {}", pc.name,
                                              plan.problem);
            }
            sandboxes.insert_or_assign(pc.name, std::move(plan));
        }
        specs.insert_or_assign(pc.name, std::move(spec));
    }
    m_specs = std::move(specs);
    m_sandboxes = std::move(sandboxes);
    return changed;
}

const result<resolved_kernelspec>& daemon::kernelspec_of(const config::pool_config& pc) const {
    static const result<resolved_kernelspec> unknown =
        error{errc::internal, "kernelspec not resolved yet"};
    auto it = m_specs.find(pc.name);
    return it == m_specs.end() ? unknown : it->second;
}

} // namespace kpool::daemon
