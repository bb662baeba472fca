// Prometheus metrics (`[daemon] metrics = "host:port"`), served by prometheus-cpp's exposer on
// its own threads. The loop thread updates them; prometheus-cpp's metric types are
// thread-safe, so a scrape never waits for the loop and never sees a torn value.
//
// Series, each labelled pool="<name>":
//   kpool_pool_target_kernels, kpool_pool_warm_kernels, kpool_pool_starting_kernels,
//   kpool_pool_leased_kernels                                        (gauges)
//   kpool_<name>_total for each counter of pool_counter_table (pool.hpp): acquired,
//   served_warm, waited, timed_out, spawn_failures, died_warm, hung_warm, leases_expired
//                                                                      (counters)
//   kpool_acquire_duration_seconds, kpool_kernel_time_to_warm_seconds        (histograms)
#pragma once

#include "daemon/core/pool.hpp"

#include <memory>
#include <string>

namespace kpool::daemon {

class metrics {
public:
    // Listens on `address` ("127.0.0.1:9464"); throws std::exception if it cannot.
    explicit metrics(const std::string& address);
    ~metrics();
    metrics(const metrics&) = delete;
    metrics& operator=(const metrics&) = delete;

    // Brings a pool's gauges and counters up to date with its state.
    void update(const pool& p);
    // Removes a pool's series (it left the config and its last kernel is gone).
    void forget(const std::string& pool_name);
    // From the acquire request to its reply carrying a kernel.
    void observe_acquire(const std::string& pool_name, double seconds);
    // From launch to the kernel's first kernel_info_reply.
    void observe_time_to_warm(const std::string& pool_name, double seconds);

private:
    struct impl;
    std::unique_ptr<impl> m_impl;
};

} // namespace kpool::daemon
