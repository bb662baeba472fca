// Pools that learn what their kernels import (issue #35): for each fork pool, what its zygote
// pre-imports and warms, kept up to date while kpoold runs and across restarts.
//
// preload = "learn" (the default): each kernel's report of the modules it used, as it ends
// and now and then while it runs (the plan's imports_every_s), goes to the pool's import_learner
// (daemon/core/import_learner.hpp); when what it wants differs from what the zygote has, the zygote
// is rebuilt in the background with the new plan (launcher_registry::rebuild), at most once every
// `rebuild_every`. preload = [list]: that plan, fixed. preload = "off": none. Every plan carries
// the environment variables acquires set (a module that reads one at import is refused) and
// preload_max_mb.
//
// What was learned (and refused) is saved to STATE_DIR/learned-imports.json (0600, written
// whole and renamed into place) whenever it changes, keyed by pool, and read back at start for
// a pool with the same kernelspec and python: the first zygote after a restart already has it.
// Every `check_every` the files of the pre-imported modules are looked at: one whose mtime
// changed (an upgrade) or that is gone gets the zygote rebuilt.
#pragma once

#include "config/config.hpp"
#include "daemon/core/import_learner.hpp"
#include "daemon/process/launcher_registry.hpp"
#include "loop/uv_timer.hpp"
#include "protocol/zygote_protocol.hpp"

#include <nlohmann/json.hpp>
#include <uv.h>

#include <chrono>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace kpool::daemon {

class import_learning {
public:
    static constexpr auto rebuild_every = std::chrono::seconds(10);
    static constexpr auto check_every = std::chrono::seconds(5); // a stat() per pre-imported module

    import_learning(uv_loop_t* loop, launcher_registry& launchers, std::string state_dir);
    import_learning(const import_learning&) = delete;
    import_learning& operator=(const import_learning&) = delete;

    // A pool at start or after a reload (its saved state read the first time), with the
    // environment its zygote and kernels start with ("NAME=value"). The plan its zygote
    // should be started with.
    protocol::zygote::preload_plan configure(const config::pool_config& pc,
                                             const std::vector<std::string>& kernel_env);
    // The pool is gone.
    void forget(const std::string& pool);

    // The variables an acquire of `pool` sets in its kernel: those whose value differs from the
    // pool's own (kpool run sends its whole environment, mostly the same) are remembered.
    void requests_set(const std::string& pool, const std::map<std::string, std::string>& env);

    // From the launchers (registry_events).
    void kernel_used(const std::string& pool, const protocol::zygote::imports& report);
    void built(const std::string& pool, const protocol::zygote::ready& ready);
    void rebuild_failed(const std::string& pool, const std::string& why);

    // For status: mode, learned, wanted, candidates, refused (why), the zygote's growth.
    nlohmann::json describe(const std::string& pool) const;

    std::string state_file() const { return m_state_dir + "/learned-imports.json"; }

private:
    struct pool_learning {
        config::pool_config config;
        import_learner learner;
        std::set<std::string> request_env;
        std::map<std::string, std::string> kernel_env;         // what its kernels start with
        protocol::zygote::preload_plan plan;                   // what the zygote was last asked for
        std::vector<protocol::zygote::preloaded_module> files; // what the zygote has, with mtimes
        double growth_mb = 0;
        std::chrono::steady_clock::time_point last_rebuild{};
        std::uint64_t rebuilds = 0;
        std::string last_rebuild_why;
    };

    protocol::zygote::preload_plan plan_of(const pool_learning& p) const;
    void maybe_rebuild(const std::string& pool, pool_learning& p, const std::string& why);
    void check_files();
    void load_state();
    void save_state();

    uv_loop_t* m_loop;
    launcher_registry& m_launchers;
    std::string m_state_dir;
    nlohmann::json m_saved = nlohmann::json::object(); // the state file as read at start
    std::map<std::string, pool_learning> m_pools;
    loop::uv_timer m_check;
    loop::uv_timer m_later; // a rebuild the rate limit held back
    bool m_warned_save = false;
};

} // namespace kpool::daemon
