// launcher_registry: the spawn launcher and the pools' zygotes, started, retired and collected.
#include "daemon/process/launcher_registry.hpp"

#include "daemon/process/kernel_environment.hpp"
#include "daemon/process/kernel_process.hpp"
#include "daemon/process/spawn_launcher.hpp"
#include "kpool/zygote_helper_sources.hpp"
#include "kpool/zygote_source.hpp"
#include "loop/logging.hpp"
#include "protocol/control.hpp"

namespace kpool::daemon {

launcher_choice choose_launcher(const config::pool_config& pc,
                                const result<resolved_kernelspec>& spec) {
    using config::launcher_kind;
    if (pc.launcher != launcher_kind::automatic) {
        return {pc.launcher,
                std::string("configured: launcher = \"") + config::to_string(pc.launcher) + "\""};
    }
    if (!spec) {
        return {launcher_kind::spawn, "auto: the kernelspec cannot be read"};
    }
    if (ipykernel_args(spec->spec.argv)) {
        return {launcher_kind::fork,
                "auto: the kernelspec runs PYTHON -m ipykernel_launcher, forked from a zygote"};
    }
    return {launcher_kind::spawn,
            "auto: only kernelspecs that run PYTHON -m ipykernel_launcher can be forked"};
}

launcher_registry::launcher_registry(uv_loop_t* loop)
    : m_loop(loop), m_spawn(std::make_unique<spawn_launcher>(loop)), m_collect(loop) {}

launcher_registry::~launcher_registry() {
    m_standby.clear();
    m_zygotes.clear();
    m_retired.clear();
    m_spawn.reset(); // last: zygotes were launched through it; joins the spawner thread
}

void launcher_registry::set_run(std::string run_dir, std::string instance_id, bool background) {
    m_run_dir = std::move(run_dir);
    m_instance = std::move(instance_id);
    m_background = background;
}

void launcher_registry::configure(const config::pool_config& pc,
                                  const result<resolved_kernelspec>& spec,
                                  const protocol::zygote::preload_plan& plan) {
    retire(pc.name);
    const launcher_choice& choice = m_choices[pc.name] = choose_launcher(pc, spec);
    if (choice.kind != config::launcher_kind::fork) {
        return;
    }
    if (!spec) {
        loop::logger("daemon")->error("pool {}: no zygote: {}", pc.name, spec.err().message);
        return;
    }
    m_setups[pc.name] = setup{pc, *spec};
    if (auto z = make_zygote(pc, *spec, plan, false)) {
        m_zygotes[pc.name] = std::move(z);
    }
}

bool launcher_registry::forks(const std::string& pool) const {
    auto it = m_choices.find(pool);
    return it != m_choices.end() && it->second.kind == config::launcher_kind::fork;
}

bool launcher_registry::rebuild(const std::string& pool,
                                const protocol::zygote::preload_plan& plan) {
    const auto s = m_setups.find(pool);
    if (s == m_setups.end() || !m_zygotes.contains(pool)) {
        return false;
    }
    if (auto old = m_standby.extract(pool)) { // a newer plan wins over one still building
        m_retired.push_back(std::move(old.mapped()));
        collect(false);
    }
    if (auto z = make_zygote(s->second.config, s->second.spec, plan, m_background)) {
        loop::logger("daemon")->info("pool {}: rebuilding its zygote in the background", pool);
        m_standby[pool] = std::move(z);
        return true;
    }
    return false;
}

std::unique_ptr<zygote_launcher>
launcher_registry::make_zygote(const config::pool_config& pc, const resolved_kernelspec& spec,
                               const protocol::zygote::preload_plan& plan, bool background) {
    launch_spec zygote;
    const std::string socket_path = m_run_dir + "/z" + std::to_string(++m_zygotes_started);
    // The kernelspec's arguments with {connection_file} unexpanded: the zygote parses them once.
    protocol::zygote::settings settings{.pool = pc.name,
                                        .socket = socket_path,
                                        .startup_code = pc.startup_code,
                                        .args = ipykernel_args(spec.spec.argv),
                                        .prime = pc.prime,
                                        .preload = plan,
                                        .helpers = {}};
    for (const auto& [name, source] : zygote_helper_sources) {
        settings.helpers.emplace_back(name, source);
    }
    zygote.argv = {spec.program, "-c", zygote_source, protocol::zygote::format(settings)};
    // The kernels' environment exactly, so that what the imports read is what each kernel would
    // have read (the zygote compares, per request).
    zygote.env = kernel_environment(spec.spec, m_instance);
    zygote.idle = background; // a rebuild is background work; the zygote leaves it once ready
    try {
        auto z = std::make_unique<zygote_launcher>(m_loop, *m_spawn, std::move(zygote), socket_path,
                                                   pc.name);
        const zygote_launcher* id = z.get();
        const std::string pool = pc.name;
        z->set_events(
            {[this, pool, id](const protocol::zygote::ready& r) { on_ready(pool, id, r); },
             [this, pool](const protocol::zygote::imports& m) {
                 if (m_events.on_imports) {
                     m_events.on_imports(pool, m);
                 }
             },
             [this, pool, id](const exit_status& st) { on_exit(pool, id, st); }});
        return z;
    } catch (const std::exception& e) {
        loop::logger("daemon")->error("pool {}: no zygote: {}", pc.name, e.what());
        return nullptr;
    }
}

void launcher_registry::on_ready(const std::string& pool, const zygote_launcher* z,
                                 const protocol::zygote::ready& ready) {
    const auto current = m_zygotes.find(pool);
    const auto standby = m_standby.find(pool);
    const bool took_over = standby != m_standby.end() && standby->second.get() == z;
    if (took_over) {
        const bool old_prebuilt =
            current != m_zygotes.end() && current->second->describe().value("prebuilt", false);
        if (!ready.prebuilt && old_prebuilt) {
            return drop_standby(pool, "the zygote with them could not pre-build kernels: " +
                                          ready.why_not);
        }
        if (current != m_zygotes.end()) {
            m_retired.push_back(std::move(current->second));
        }
        m_zygotes[pool] = std::move(standby->second);
        m_standby.erase(standby);
        collect(false);
        loop::logger("daemon")->info("pool {}: the rebuilt zygote takes over", pool);
    } else if (current == m_zygotes.end() || current->second.get() != z) {
        return; // a retired zygote that restarted: it forks nothing more
    }
    if (m_events.on_built) {
        m_events.on_built(pool, ready, took_over);
    }
}

void launcher_registry::on_exit(const std::string& pool, const zygote_launcher* z,
                                const exit_status& status) {
    const auto standby = m_standby.find(pool);
    if (standby != m_standby.end() && standby->second.get() == z && !z->ready()) {
        drop_standby(pool,
                     "the zygote with them exited before it was ready (" + status.describe() + ")");
    }
}

void launcher_registry::drop_standby(const std::string& pool, const std::string& why) {
    auto node = m_standby.extract(pool);
    if (node.empty()) {
        return;
    }
    loop::logger("daemon")->warn("pool {}: the rebuilt zygote does not take over: {}", pool, why);
    m_retired.push_back(std::move(node.mapped()));
    collect(false); // not now: we are inside its callback
    if (m_events.on_rebuild_failed) {
        m_events.on_rebuild_failed(pool, why);
    }
}

void launcher_registry::retire(const std::string& pool) {
    m_choices.erase(pool);
    m_setups.erase(pool);
    if (auto it = m_standby.find(pool); it != m_standby.end()) {
        m_retired.push_back(std::move(it->second));
        m_standby.erase(it);
    }
    if (auto it = m_zygotes.find(pool); it != m_zygotes.end()) {
        m_retired.push_back(std::move(it->second));
        m_zygotes.erase(it);
        collect(false);
    }
}

launcher& launcher_registry::launcher_for(const std::string& pool) {
    auto it = m_zygotes.find(pool);
    return it != m_zygotes.end() ? static_cast<launcher&>(*it->second) : *m_spawn;
}

void launcher_registry::describe(const config::pool_config& pc, nlohmann::json& status) const {
    if (auto it = m_choices.find(pc.name); it != m_choices.end()) {
        status["launcher"] = config::to_string(it->second.kind);
        status["launcher_why"] = it->second.why;
    } else {
        status["launcher"] = config::to_string(pc.launcher);
    }
    if (auto it = m_zygotes.find(pc.name); it != m_zygotes.end()) {
        status["zygote_ready"] = it->second->ready();
        status["zygote"] = it->second->describe();
        status["zygote"]["rebuilding"] = m_standby.contains(pc.name);
    }
}

void launcher_registry::collect(bool everything) {
    m_collect_everything = m_collect_everything || everything;
    m_collect.start(std::chrono::milliseconds(0), [this] {
        std::erase_if(m_retired, [](const auto& z) { return z->childless(); });
        if (m_collect_everything) {
            m_standby.clear();
            m_zygotes.clear();
            m_retired.clear();
        }
        m_collect_everything = false;
    });
}

} // namespace kpool::daemon
