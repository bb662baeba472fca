// Kernels kpool serve holds ready for its next requests: taken from kpoold ahead of time,
// connected, and with their iopub subscription proven, so that a request pays neither the
// acquire nor the handshake with a new kernel (about 4.5 ms of a 14 ms /v1/exec on 2 cores).
// Each is still a fresh kernel that no request has used; a request that takes one gets its
// cwd/env applied to it (kpoold's context op) and gives it back when it is over, as always.
//
// Prepared ahead: when a pool's last two requests asked for the same cwd and history (and no
// env), its spares are acquired with them, so the history move and the chdir happen at refill
// time, not on a request's path (kpoold's context op then finds them there and asks the kernel
// nothing: still_needed in daemon/process/kernel_process.hpp, which checks the directory itself,
// not only its name). A request takes a spare prepared as it asks first, else one it can still
// be given its context on (a plain one); none such, one spare prepared for what requests asked
// before is released so that the next top-up prepares for what they ask now.
//
// `per_pool` spares for each pool that requests have used (/v1, or the Kernel Gateway API's
// starts and restarts; none before the first). Each holds all four of the kernel's channels, so
// that a gateway kernel can be made of it as well as a /v1 request's session. Topped up when no
// request runs (never in the middle of one, whose kernel would share the CPU with the
// handshake), and after each tick of serve/held_kernels.hpp (which obtains them, renews their
// leases and polls them); only from warm kernels (an acquire with timeout 0), so spares never
// queue in front of a request. Every one is released when kpool serve stops.
#pragma once

#include "serve/connected_kernel.hpp"
#include "serve/held_kernels.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kpool::serve {

class request_services;

class spare_kernels {
public:
    // Subscribed: its channels' kernel_info() holds the reply, or will before any other.
    using spare = connected_kernel;

    spare_kernels(request_services& owner, std::size_t per_pool);
    ~spare_kernels();
    spare_kernels(const spare_kernels&) = delete;
    spare_kernels& operator=(const spare_kernels&) = delete;

    // A ready spare for a caller's order, if one is there (what it asks is learnt too).
    std::optional<spare> take(const kernel_order& order);
    // A request used the order's pool: it gets spares from now on.
    void used(const kernel_order& order);
    // Nothing runs now (or a tick passed): a good time to replace the spares taken.
    void top_up();
    // Stops topping up and releases every spare; `done` once kpoold has them all back (also
    // those still being obtained).
    void release_all(std::function<void()> done);

    std::size_t ready() const;

    // What a spare was acquired with (empty and false: a plain one).
    struct prepared {
        std::string cwd;
        bool memory_history = false;
        bool operator==(const prepared&) const = default;
    };

private:
    struct held {
        spare kernel;
        kernel_watch watch;
        prepared with;
    };
    struct pool_spares {
        std::vector<held> ready;
        bool obtaining = false; // one at a time per pool
        std::chrono::steady_clock::time_point next_try{};
        // The last two requests' contexts (null: one that asked for an env, never prepared).
        std::optional<prepared> last, before_last;
    };

    // What `p`'s next spares are acquired with: what its last two requests agreed on.
    static prepared to_prepare(const pool_spares& p);
    static void learn(pool_spares& p, const kernel_order& order);

    void fill(const std::string& name, pool_spares& p);
    void on_obtained(const std::string& name, const prepared& with, obtained kernel);
    void drop(const std::string& name, const std::string& kernel_id, bool release);
    void release(const kernel_lease& lease);
    void finish_release_if_done();
    void update_gauge();

    request_services& m_owner;
    std::size_t m_per_pool;
    std::map<std::string, pool_spares> m_pools;
    std::size_t m_in_flight = 0; // obtains and releases not over yet
    bool m_stopping = false;
    std::function<void()> m_on_released;
};

} // namespace kpool::serve
