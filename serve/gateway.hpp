// kpool serve's Kernel Gateway API: the kernels it holds for notebook servers on other hosts
// (jupyter_server --gateway-url), each a warm kernel from the pool under an id of ours.
// POST /api/kernels hands one out (KERNEL_WORKING_DIR its cwd, KERNEL_* and allowed variables
// its environment); restart swaps in another warm kernel under the same id; a kernel that dies is
// replaced the same way (its websockets see "restarting"). Leases are short and renewed while we
// hold a kernel, so kernels outlive a crashed kpool serve by one lease at most; idle kernels are
// culled as Kernel Gateway culls them; every kernel is released when kpool serve stops.
// Sessions (/api/sessions, serve/gateway_sessions.hpp) sit above: they name these kernels for
// notebook paths.
#pragma once

#include "loop/uv_timer.hpp"
#include "serve/gateway_kernel.hpp"
#include "serve/gateway_routes.hpp"
#include "serve/http_server.hpp"
#include "serve/kernel_leases.hpp"

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
        lease_watch watch;
    };
    using acquired_fn = std::function<void(result<kernel_lease>, http_response refusal)>;
    using obtained_fn = std::function<void(result<connected_kernel>, http_response refusal)>;

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
    // A kernel of pool `name` with `cwd`/`env` applied, connected and subscribed: a spare when
    // one is ready (no acquire, no handshake on the caller's time), else a fresh one. `done`
    // once, with the kernel or the answer for the caller.
    void obtain(const std::string& name, const std::string& cwd,
                const std::map<std::string, std::string>& env, obtained_fn done);
    void obtain_spare(connected_kernel spare, const std::string& name, const std::string& cwd,
                      const std::map<std::string, std::string>& env, obtained_fn done);
    void obtain_fresh(const std::string& name, const std::string& cwd,
                      const std::map<std::string, std::string>& env, obtained_fn done);
    void acquire(const std::string& name, const std::string& cwd,
                 const std::map<std::string, std::string>& env, acquired_fn done);
    void release(
        const kernel_lease& lease, std::function<void()> done = [] {});
    // Restart's swap, also after a death (`why`: "restart", "died"). `done` with the model or
    // the answer for the caller.
    void replace(const std::string& id, const std::string& why,
                 std::function<void(http_response)> done);
    void cull();
    void poll();
    void retire(std::unique_ptr<gateway_kernel> kernel);

    request_services& m_owner;
    std::map<std::string, held> m_kernels;
    struct starting {
        connected_kernel kernel;
        obtained_fn done;
    };
    std::map<std::string, starting> m_starting;             // by kpoold's kernel id: until obtained
    std::size_t m_starts = 0;                               // POST /api/kernels not answered yet
    std::vector<std::unique_ptr<gateway_kernel>> m_retired; // freed on the next loop turn
    loop::uv_timer m_reaper;
    loop::uv_timer m_cull_timer;
    loop::uv_timer m_poll_timer;
    bool m_stopping = false; // release_all was called: kernels acquired after it go back
};

} // namespace kpool::serve
