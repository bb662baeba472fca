// launcher_registry: the spawn launcher and the pools' zygotes, started, retired and collected.
#include "daemon/process/launcher_registry.hpp"

#include "daemon/loop/logging.hpp"
#include "daemon/process/kernel_process.hpp"
#include "daemon/process/spawn_launcher.hpp"
#include "kpool/zygote_source.hpp"
#include "protocol/control.hpp"

namespace kpool::daemon {

launcher_choice choose_launcher(const config::pool_config& pc,
                                const result<resolved_kernelspec>& spec) {
    using config::launcher_kind;
    if (pc.launcher != launcher_kind::automatic) {
        return {pc.launcher, std::string("configured: launcher = \"") + config::to_string(pc.launcher) + "\""};
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
    m_zygotes.clear();
    m_retired.clear();
    m_spawn.reset(); // last: zygotes were launched through it; joins the spawner thread
}

void launcher_registry::set_run(std::string run_dir, std::string instance_id) {
    m_run_dir = std::move(run_dir);
    m_instance = std::move(instance_id);
}

void launcher_registry::configure(const config::pool_config& pc,
                                  const result<resolved_kernelspec>& spec) {
    retire(pc.name);
    const launcher_choice& choice = m_choices[pc.name] = choose_launcher(pc, spec);
    if (choice.kind != config::launcher_kind::fork) {
        return;
    }
    if (!spec) {
        logger("daemon")->error("pool {}: no zygote: {}", pc.name, spec.err().message);
        return;
    }
    start_zygote(pc, *spec);
}

bool launcher_registry::forks(const std::string& pool) const {
    auto it = m_choices.find(pool);
    return it != m_choices.end() && it->second.kind == config::launcher_kind::fork;
}

void launcher_registry::start_zygote(const config::pool_config& pc, const resolved_kernelspec& spec) {
    launch_spec zygote;
    const std::string socket_path = m_run_dir + "/z" + std::to_string(++m_zygotes_started);
    // The kernelspec's arguments with {connection_file} unexpanded: the zygote parses them once.
    const auto args = ipykernel_args(spec.spec.argv);
    zygote.argv = {spec.program, "-c", zygote_source, socket_path, pc.startup_code,
                   args ? protocol::dump_json(*args) : std::string("null"),
                   pc.prime ? "prime" : "no-prime"};
    // The kernels' environment exactly, so that what the imports read is what each kernel would
    // have read (the zygote compares, per request).
    zygote.env = kernel_environment(spec.spec, m_instance);
    try {
        m_zygotes[pc.name] =
            std::make_unique<zygote_launcher>(m_loop, *m_spawn, std::move(zygote), socket_path, pc.name);
    } catch (const std::exception& e) {
        logger("daemon")->error("pool {}: no zygote: {}", pc.name, e.what());
    }
}

void launcher_registry::retire(const std::string& pool) {
    m_choices.erase(pool);
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
    }
}

void launcher_registry::collect(bool everything) {
    m_collect_everything = m_collect_everything || everything;
    m_collect.start(std::chrono::milliseconds(0), [this] {
        std::erase_if(m_retired, [](const auto& z) { return z->childless(); });
        if (m_collect_everything) {
            m_zygotes.clear();
            m_retired.clear();
        }
        m_collect_everything = false;
    });
}

} // namespace kpool::daemon
