// Kernels kpool serve holds ready for its next requests: taken from kpoold ahead of time,
// connected, and with their iopub subscription proven, so that a request pays neither the
// acquire nor the handshake with a new kernel (about 4.5 ms of a 14 ms /v1/exec on 2 cores).
// Each is still a fresh kernel that no request has used; a request that takes one gets its
// cwd/env applied to it (kpoold's context op) and gives it back when it is over, as always.
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

    // A ready spare of `pool`, if one is there.
    std::optional<spare> take(const std::string& pool);
    // A request used `pool`: it gets spares from now on.
    void used(const std::string& pool);
    // Nothing runs now (or a tick passed): a good time to replace the spares taken.
    void top_up();
    // Stops topping up and releases every spare; `done` once kpoold has them all back (also
    // those still being obtained).
    void release_all(std::function<void()> done);

    std::size_t ready() const;

private:
    struct held {
        spare kernel;
        kernel_watch watch;
    };
    struct pool_spares {
        std::vector<held> ready;
        bool obtaining = false; // one at a time per pool
        std::chrono::steady_clock::time_point next_try{};
    };

    void fill(const std::string& name, pool_spares& p);
    void on_obtained(const std::string& name, obtained kernel);
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
