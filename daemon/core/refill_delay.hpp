// How long a pool's refill waits after an acquire while the pool still has a warm kernel and
// none starting, and why (status shows both). The config's value where there is one
// ([pools.NAME] refill_delay_s, else [daemon] refill_delay_s); else a default by how the pool's
// kernels start:
//
// - forked: 50 ms. A fork from the zygote costs little CPU, and starting it at once beside the
//   client's first code still slowed that code down on 2 cores (a first `print(1)` 15.0 ms with
//   the refill at once, 9.8 ms 50 ms later).
// - spawned: 1 s. A spawned kernel's start-up is about a second of interpreter CPU; even at
//   SCHED_IDLE it shares the cores' caches with the first cells (xeus-python's first result
//   1.46-1.64x the next nine's median with 50 ms, 1.21-1.32x with 1 s; bench/README.md).
//
// Pure code: the daemon passes whether the pool forks (launcher_registry decides).
#pragma once

#include "config/config.hpp"

#include <chrono>
#include <string>

namespace kpool::daemon {

struct refill_delay {
    enum class source { pool, daemon, forked_default, spawned_default };
    double seconds = 0;
    source from = source::spawned_default;

    std::chrono::milliseconds duration() const;
    // For status: where the delay comes from (formatted only there, not on the acquire path).
    std::string why(const std::string& pool_name) const;
};

refill_delay refill_delay_for(const config::daemon_config& d, const config::pool_config& p,
                              bool forks);

} // namespace kpool::daemon
