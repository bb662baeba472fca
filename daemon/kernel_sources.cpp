// Where a pool's kernels come from: its kernelspec, resolved at start and on reload, and its
// launcher (the shared spawn launcher, or the pool's zygote for launcher = "fork"), with the
// zygotes' life: started, retired on reload, destroyed once their kernels are gone.
#include "daemon/daemon.hpp"

#include "daemon/logging.hpp"
#include "kpool/zygote_source.hpp"

namespace kpool::daemon {

std::set<std::string> daemon::resolve_kernelspecs(const config::config& cfg) {
    std::set<std::string> changed;
    std::map<std::string, result<resolved_kernelspec>> specs;
    for (const auto& pc : cfg.pools) {
        auto spec = resolve_pool_kernelspec(pc.kernelspec, pc.python);
        if (!spec) {
            logger("daemon")->error("{}: pool '{}': {}", pc.kernelspec_at, pc.name,
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

launcher& daemon::launcher_for(const config::pool_config& pc) {
    auto it = m_zygotes.find(pc.name);
    return it != m_zygotes.end() ? static_cast<launcher&>(*it->second) : *m_launcher;
}

void daemon::start_zygote(const config::pool_config& pc) {
    retire_zygote(pc.name);
    const auto& spec = kernelspec_of(pc);
    if (!spec) {
        logger("daemon")->error("pool {}: no zygote: {}", pc.name, spec.err().message);
        return;
    }
    launch_spec zygote;
    const std::string socket_path = m_instance->path() + "/z" + std::to_string(++m_zygotes_started);
    zygote.argv = {spec->program, "-c", zygote_source, socket_path, pc.startup_code};
    zygote.env = kernel_environment(spec->spec, m_instance->id());
    // debugpy warns about frozen modules when imported by a bare interpreter; the zygote's
    // children get the kernel environment of each request, not this.
    zygote.env.push_back("PYDEVD_DISABLE_FILE_VALIDATION=1");
    try {
        m_zygotes[pc.name] = std::make_unique<zygote_launcher>(&m_loop, *m_launcher, std::move(zygote),
                                                               socket_path, pc.name);
    } catch (const std::exception& e) {
        logger("daemon")->error("pool {}: no zygote: {}", pc.name, e.what());
    }
}

void daemon::retire_zygote(const std::string& pool_name) {
    if (auto it = m_zygotes.find(pool_name); it != m_zygotes.end()) {
        m_retired_zygotes.push_back(std::move(it->second));
        m_zygotes.erase(it);
        schedule_zygote_cleanup();
    }
}

void daemon::schedule_zygote_cleanup() {
    m_zygote_cleanup->start(std::chrono::milliseconds(0), [this] {
        std::erase_if(m_retired_zygotes, [](const auto& z) { return z->idle(); });
        if (m_shutting_down && m_kernels.empty()) {
            m_zygotes.clear();
            m_retired_zygotes.clear();
        }
    });
}

} // namespace kpool::daemon
