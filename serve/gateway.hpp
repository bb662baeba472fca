// kpool serve's Kernel Gateway API: the kernels it holds for notebook servers on other hosts
// (jupyter_server --gateway-url), each a warm kernel from the pool under an id of ours.
// POST /api/kernels hands one out (KERNEL_WORKING_DIR its cwd, KERNEL_* and allowed variables
// its environment); restart swaps in another warm kernel under the same id; a kernel that dies is
// replaced the same way (its websockets see "restarting"). Leases are short and renewed while we
// hold a kernel (serve/held_kernels.hpp), so kernels outlive a crashed kpool serve by one lease
// at most; idle kernels are culled as Kernel Gateway culls them; every kernel is released when
// kpool serve stops.
// Sessions (/api/sessions, serve/gateway_sessions.hpp) sit above: they name these kernels for
// notebook paths.
#pragma once

#include "loop/uv_timer.hpp"
#include "serve/gateway_kernel.hpp"
#include "serve/gateway_routes.hpp"
#include "serve/held_kernels.hpp"
#include "serve/http_server.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kpool::serve {

class request_services;

class gateway {
public:
    explicit gateway(request_services& owner);
    ~gateway();
    gateway(const gateway&) = delete;
    gateway& operator=(const gateway&) = delete;

    void handle(exchange_ptr exchange, const do_gateway& action);
    void answer(const exchange_ptr& exchange, http_response response);

    // A kernel of pool `kernel_name` (empty: the default) held under a new id of ours, started
    // in `cwd` with `env` (both as kpoold's acquire takes them; empty: the pool's). `done` once,
    // with the id or the answer for the caller.
    using launched_fn = std::function<void(std::optional<std::string> id, http_response refusal)>;
    void launch(const exchange_ptr& exchange, const std::string& kernel_name,
                const std::string& cwd, const std::map<std::string, std::string>& env,
                launched_fn done);
    // jupyter_server's model of a kernel we hold, or none.
    std::optional<nlohmann::json> kernel_model(const std::string& id) const;
    // Shuts a kernel down (its websockets closed, its lease released), as DELETE /api/kernels/ID.
    void remove(const std::string& id);
    // Stops every kernel's websockets and releases every kernel; `done` once kpoold answered.
    void release_all(std::function<void()> done);
    std::size_t kernels() const { return m_kernels.size(); }

private:
    struct held {
        std::unique_ptr<gateway_kernel> kernel;
        std::string cwd; // for restarts: what the first start asked for
        std::map<std::string, std::string> env;
        bool replacing = false; // a restart (or a replacement after a death) is under way
        kernel_watch watch;     // of the kernel's current lease
        // Its kernel died and is being replaced (replace_dead): later polls of the dead lease
        // say nothing new, and the next attempt is on `retry`.
        bool mourning = false;
        std::unique_ptr<loop::uv_timer> retry;
    };
    using obtained_fn = std::function<void(obtained)>;

    // The pools of the kpoold that answers, as jupyter_server's kernelspec models.
    struct served_specs {
        nlohmann::json models = nlohmann::json::object(); // by pool name
        std::map<std::string, std::string> resource_dirs; // by pool name
        std::string first;
    };
    // The kernel held under `id`, else none and the caller answered 404.
    gateway_kernel* held_kernel(const exchange_ptr& exchange, const std::string& id);
    void served_kernelspecs(std::function<void(result<served_specs>)> done);
    void kernelspecs(exchange_ptr exchange, const do_gateway& action);
    void resource(exchange_ptr exchange, const do_gateway& action);
    void start(exchange_ptr exchange, const do_gateway& action);
    void restart(exchange_ptr exchange, const std::string& id);
    // A kernel of pool `name` with `cwd`/`env` applied, connected and subscribed
    // (held_kernels::obtain); while kpool serve stops, it goes back and `done` gets a 503.
    void obtain(const std::string& name, const std::string& cwd,
                const std::map<std::string, std::string>& env, obtained_fn done);
    // Tells us when the kernel held under `id` on `lease` dies: it is replaced.
    kernel_watch watch(const std::string& id, const kernel_lease& lease);
    void on_gone(const std::string& id, const std::string& kernel_id, const kernel_gone& gone);
    // The replacement of a kernel that died, `attempt` of died_replace_attempts: one refused for
    // want of a kernel in time (429, 503) is tried again a second later, as jupyter_client's
    // restarter tries a failed restart again; after the last, or a refusal of another kind, the
    // kernel is "dead" (its watch ended) until a client restarts it.
    void replace_dead(const std::string& id, int attempt);
    // replace_dead(id, attempt) after died_replace_pause (later still while a restart runs).
    void replace_dead_later(const std::string& id, int attempt);
    void release(
        const kernel_lease& lease, std::function<void()> done = [] {});
    // Released while stopping: release_all's `done` waits for it.
    void release_counted(const kernel_lease& lease);
    void finish_release_if_done();
    // Restart's swap, also after a death (`why`: "restart", "died"). `done` with the model or
    // the answer for the caller.
    void replace(const std::string& id, const std::string& why,
                 std::function<void(http_response)> done);
    void cull();
    void retire(std::unique_ptr<gateway_kernel> kernel);

    request_services& m_owner;
    std::map<std::string, held> m_kernels;
    std::size_t m_starts = 0;                               // POST /api/kernels not answered yet
    std::size_t m_obtaining = 0;                            // obtains not over yet
    std::size_t m_releasing = 0;                            // release_all's releases in flight
    std::vector<std::unique_ptr<gateway_kernel>> m_retired; // freed on the next loop turn
    loop::uv_timer m_reaper;
    loop::uv_timer m_cull_timer;
    bool m_stopping = false; // release_all was called: kernels obtained after it go back
    std::function<void()> m_on_released;
};

} // namespace kpool::serve
