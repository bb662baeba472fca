// Where each pool's kernels come from: the spawn launcher, shared by every pool, and for
// launcher = "fork" pools a zygote of their own. Owns them all: starts a pool's zygote, retires
// it on reload (the old one lives on until its kernels are gone), rebuilds it with another
// preload plan in the background (the new zygote starts at idle priority beside the old one and
// takes over once ready, unless it could not pre-build where the old one could), destroys
// retired ones outside their own callbacks, and describes a pool's launcher for status.
//
// A new launcher kind is a value of config::launcher_kind (with its name in config.cpp), a
// launcher class, and a case in configure() here; describe() reports any kind by name.
#pragma once

#include "config/config.hpp"
#include "daemon/process/launcher.hpp"
#include "daemon/process/zygote_launcher.hpp"
#include "jupyter/kernelspec.hpp"
#include "loop/uv_timer.hpp"

#include <nlohmann/json.hpp>
#include <uv.h>

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kpool::daemon {

using jupyter::resolved_kernelspec;

// How a pool's kernels start, and why (status shows both). "auto" forks a kernelspec that runs
// `PYTHON -m ipykernel_launcher` (the zygote pre-builds ipykernel 6 and falls back to a plain
// launch in the child for other versions) and spawns any other kernel.
struct launcher_choice {
    config::launcher_kind kind = config::launcher_kind::spawn;
    std::string why;
};
launcher_choice choose_launcher(const config::pool_config& pc,
                                const result<resolved_kernelspec>& spec);

// What the pools' zygotes report, by pool (for daemon/service/import_learning.hpp).
struct registry_events {
    // A pool's zygote is ready: its first start, a restart, or a rebuild that took over
    // (`took_over`: the pool's warm kernels are the old zygote's).
    std::function<void(const std::string& pool, const protocol::zygote::ready&, bool took_over)>
        on_built;
    // A rebuild did not take over (why), and the zygote it replaced serves on.
    std::function<void(const std::string& pool, const std::string& why)> on_rebuild_failed;
    // A kernel forked by any of the pool's zygotes (retired ones too) ended.
    std::function<void(const std::string& pool, const protocol::zygote::imports&)> on_imports;
};

class launcher_registry {
public:
    explicit launcher_registry(uv_loop_t* loop);
    ~launcher_registry();
    launcher_registry(const launcher_registry&) = delete;
    launcher_registry& operator=(const launcher_registry&) = delete;

    // Where zygote sockets and logs go, and the run id kernels are marked with. Before the
    // first configure().
    // `background`: rebuilt zygotes may start at SCHED_IDLE (cpu_priority says they can leave it).
    void set_run(std::string run_dir, std::string instance_id, bool background = false);
    void set_events(registry_events events) { m_events = std::move(events); }

    // A pool's launcher at start, and on a reload that changes what its kernels are started
    // with: a fork pool gets a fresh zygote (the old one is retired), a spawn pool loses the
    // zygote it had. launcher = "auto" is decided here (choose_launcher).
    void configure(const config::pool_config& pc, const result<resolved_kernelspec>& spec,
                   const protocol::zygote::preload_plan& plan = {});
    // A fork pool's zygote again with `plan`, in the background (see above). False when the
    // pool has no zygote to rebuild.
    bool rebuild(const std::string& pool, const protocol::zygote::preload_plan& plan);
    bool rebuilding(const std::string& pool) const { return m_standby.contains(pool); }
    // Whether the pool's kernels are forked from a zygote (as configure decided).
    bool forks(const std::string& pool) const;
    // The pool is gone: its zygote goes once its kernels have.
    void retire(const std::string& pool);

    launcher& launcher_for(const std::string& pool);
    // vfork+exec for short helper programs (kpool-sandbox workdir), whatever a pool's launcher.
    launcher& spawner() { return *m_spawn; }
    // The status fields of the pool's launcher.
    void describe(const config::pool_config& pc, nlohmann::json& status) const;

    // Destroys retired zygotes whose kernels are all gone (and, when `everything`, every zygote:
    // the daemon is shutting down and no kernel is left). Deferred to the next loop turn, since
    // it may be asked from inside a zygote's own callback.
    void collect(bool everything);
    bool has_retired() const { return !m_retired.empty(); }

private:
    std::unique_ptr<zygote_launcher> make_zygote(const config::pool_config& pc,
                                                 const resolved_kernelspec& spec,
                                                 const protocol::zygote::preload_plan& plan,
                                                 bool background);
    void on_ready(const std::string& pool, const zygote_launcher* z,
                  const protocol::zygote::ready& ready);
    void on_exit(const std::string& pool, const zygote_launcher* z, const exit_status& status);
    void drop_standby(const std::string& pool, const std::string& why);

    struct setup {
        config::pool_config config;
        resolved_kernelspec spec;
    };

    uv_loop_t* m_loop;
    std::unique_ptr<launcher> m_spawn;
    std::string m_run_dir;
    std::string m_instance;
    std::map<std::string, launcher_choice> m_choices;                  // by pool
    std::map<std::string, setup> m_setups;                             // fork pools, by pool
    std::map<std::string, std::unique_ptr<zygote_launcher>> m_zygotes; // by pool
    std::map<std::string, std::unique_ptr<zygote_launcher>> m_standby; // rebuilds, until ready
    std::vector<std::unique_ptr<zygote_launcher>> m_retired;           // until their kernels go
    loop::uv_timer m_collect;
    bool m_collect_everything = false;
    int m_zygotes_started = 0;
    bool m_background = false;
    registry_events m_events;
};

} // namespace kpool::daemon
