// Where each pool's kernels come from: the spawn launcher, shared by every pool, and for
// launcher = "fork" pools a zygote of their own. Owns them all: starts a pool's zygote, retires
// it on reload (the old one lives on until its kernels are gone), destroys retired ones outside
// their own callbacks, and describes a pool's launcher for status.
//
// A new launcher kind is a value of config::launcher_kind (with its name in config.cpp), a
// launcher class, and a case in configure() here; describe() reports any kind by name.
#pragma once

#include "config/config.hpp"
#include "daemon/loop/uv_timer.hpp"
#include "jupyter/kernelspec.hpp"
#include "daemon/process/launcher.hpp"
#include "daemon/process/zygote_launcher.hpp"

#include <nlohmann/json.hpp>
#include <uv.h>

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

class launcher_registry {
public:
    explicit launcher_registry(uv_loop_t* loop);
    ~launcher_registry();
    launcher_registry(const launcher_registry&) = delete;
    launcher_registry& operator=(const launcher_registry&) = delete;

    // Where zygote sockets and logs go, and the run id kernels are marked with. Before the
    // first configure().
    void set_run(std::string run_dir, std::string instance_id);

    // A pool's launcher at start, and on a reload that changes what its kernels are started
    // with: a fork pool gets a fresh zygote (the old one is retired), a spawn pool loses the
    // zygote it had. launcher = "auto" is decided here (choose_launcher).
    void configure(const config::pool_config& pc, const result<resolved_kernelspec>& spec);
    // Whether the pool's kernels are forked from a zygote (as configure decided).
    bool forks(const std::string& pool) const;
    // The pool is gone: its zygote goes once its kernels have.
    void retire(const std::string& pool);

    launcher& launcher_for(const std::string& pool);
    // The status fields of the pool's launcher.
    void describe(const config::pool_config& pc, nlohmann::json& status) const;

    // Destroys retired zygotes whose kernels are all gone (and, when `everything`, every zygote:
    // the daemon is shutting down and no kernel is left). Deferred to the next loop turn, since
    // it may be asked from inside a zygote's own callback.
    void collect(bool everything);
    bool has_retired() const { return !m_retired.empty(); }

private:
    void start_zygote(const config::pool_config& pc, const resolved_kernelspec& spec);

    uv_loop_t* m_loop;
    std::unique_ptr<launcher> m_spawn;
    std::string m_run_dir;
    std::string m_instance;
    std::map<std::string, launcher_choice> m_choices;                   // by pool
    std::map<std::string, std::unique_ptr<zygote_launcher>> m_zygotes; // by pool
    std::vector<std::unique_ptr<zygote_launcher>> m_retired;          // until their kernels go
    uv_timer m_collect;
    bool m_collect_everything = false;
    int m_zygotes_started = 0;
};

} // namespace kpool::daemon
