// What a pool's kernels run: its kernelspec, resolved at start and on reload (no file I/O per
// kernel start). Where they come from is launcher_registry's.
#include "daemon/service/daemon.hpp"

#include "loop/logging.hpp"

namespace kpool::daemon {

std::set<std::string> daemon::resolve_kernelspecs(const config::config& cfg) {
    std::set<std::string> changed;
    std::map<std::string, result<resolved_kernelspec>> specs;
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
        specs.insert_or_assign(pc.name, std::move(spec));
    }
    m_specs = std::move(specs);
    return changed;
}

const result<resolved_kernelspec>& daemon::kernelspec_of(const config::pool_config& pc) const {
    static const result<resolved_kernelspec> unknown =
        error{errc::internal, "kernelspec not resolved yet"};
    auto it = m_specs.find(pc.name);
    return it == m_specs.end() ? unknown : it->second;
}

} // namespace kpool::daemon
