// A pool of kernels of one kernelspec: the state machine, with no processes and no sockets.
//
// Kernels move starting -> warm -> leased -> stopping -> (gone); a kernel that fails or dies
// goes to stopping (or straight to gone) from any state. The pool decides what to start, whom
// to serve and what to stop; a kernel_driver carries that out and reports back through the
// on_* methods, and a waiter_sink delivers answers to acquires that had to wait. Time is passed
// in, so tests drive the pool deterministically with a fake driver.
#pragma once

#include "config/config.hpp"
#include "daemon/core/autosize.hpp"
#include "protocol/connection_info.hpp"
#include "protocol/result.hpp"

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <variant>
#include <vector>

namespace kpool::daemon {

using clock = std::chrono::steady_clock;
using waiter_id = std::uint64_t;

enum class kernel_state { starting, warm, leased, stopping };
const char* to_string(kernel_state s) noexcept;

struct kernel_entry {
    std::string id;
    std::string pool;
    kernel_state state = kernel_state::starting;
    int pid = 0;
    clock::time_point created;
    clock::time_point state_since;
    std::optional<clock::time_point> lease_deadline;
    protocol::connection_info connection;
    std::string connection_file;
    bool failed = false;  // start failed or died: counted once, never handed out
    bool awaited = false; // starting while an acquire waits: not background work
};

struct pool_counters {
    std::uint64_t acquired = 0;    // acquires answered with a kernel
    std::uint64_t served_warm = 0; // ... of which found a warm kernel at once
    std::uint64_t waited = 0;      // ... of which waited for one to become warm
    std::uint64_t timed_out = 0;
    std::uint64_t spawn_failures = 0;
    std::uint64_t died_warm = 0;
    std::uint64_t hung_warm = 0; // warm kernels that stopped answering the heartbeat
    std::uint64_t leases_expired = 0;
    std::string last_error;
};

// Every counter once: its name in status ("counters") and in Prometheus (kpool_NAME_total),
// what it counts, and where it lives. Status and metrics are both generated from this table,
// so a new counter is a field above and a line here.
struct counter_description {
    const char* name;
    const char* help;
    std::uint64_t pool_counters::*field;
};
inline constexpr counter_description pool_counter_table[] = {
    {"acquired", "Acquires answered with a kernel", &pool_counters::acquired},
    {"served_warm", "Acquires that found a warm kernel at once", &pool_counters::served_warm},
    {"waited", "Acquires that waited for a kernel to become warm", &pool_counters::waited},
    {"timed_out", "Acquires that timed out", &pool_counters::timed_out},
    {"spawn_failures", "Kernels that failed to start", &pool_counters::spawn_failures},
    {"died_warm", "Warm kernels that exited by themselves", &pool_counters::died_warm},
    {"hung_warm", "Warm kernels that missed a heartbeat and were replaced",
     &pool_counters::hung_warm},
    {"leases_expired", "Leased kernels shut down because their lease ran out",
     &pool_counters::leases_expired},
};

// The last few hundred measurements of something, for medians in `status` (Prometheus gets
// the full histograms).
class recent_samples {
public:
    void add(double v);
    // The p-th percentile (0-100) of the window, or nothing before the first sample.
    std::optional<double> percentile(double p) const;

private:
    static constexpr std::size_t capacity = 256;
    std::vector<double> m_values;
    std::size_t m_next = 0;
};

// The shared cap on kernels across all pools (`max_kernels`).
struct kernel_budget {
    int max = 64;
    int used = 0;     // kernels in any state, all pools
    int stopping = 0; // of which on their way out: their room comes back soon
    bool available() const { return used < max; }
};

class pool;

// What the pool asks of the world.
class kernel_driver {
public:
    virtual ~kernel_driver() = default;
    // Start a kernel; afterwards report on_spawned, then on_warm or on_start_failed, and
    // on_exited when the process is gone. An error means nothing was started. `awaited`: an
    // acquire is waiting for it, so it starts at normal CPU priority rather than as background
    // work.
    virtual status start_kernel(pool& owner, const std::string& id, bool awaited) = 0;
    // An acquire now waits for this starting kernel: background work no more.
    virtual void hurry(const std::string& id) = 0;
    // Shut a kernel down; on_exited follows.
    virtual void stop_kernel(const std::string& id) = 0;
    // A kernel became warm (unleased in the pool: watch its health, `watched`) or stopped being
    // warm (leased or stopping: hands off).
    virtual void watch_kernel(const std::string& id, bool watched) = 0;
};

// Answers for acquires that waited.
class waiter_sink {
public:
    virtual ~waiter_sink() = default;
    // Returns false when the client can no longer be reached; the kernel then stays warm.
    virtual bool granted(waiter_id waiter, const kernel_entry& kernel) = 0;
    virtual void failed(waiter_id waiter, const error& err) = 0;
};

struct acquire_queued {};
using acquire_outcome = std::variant<const kernel_entry*, acquire_queued, error>;

class pool {
public:
    pool(config::pool_config cfg, kernel_budget& budget, kernel_driver& driver,
         waiter_sink& waiters, std::function<std::string()> make_id);

    const config::pool_config& config() const { return m_cfg; }
    const pool_counters& counters() const { return m_counters; }
    const std::map<std::string, kernel_entry>& kernels() const { return m_kernels; }
    int count(kernel_state s) const;
    std::size_t waiting() const { return m_waiters.size(); }

    // A warm kernel now (leased to the caller, who calls refill() once it has replied), or
    // queued for the next warm one (answered through waiter_sink), or an error (timeout at
    // once for timeout 0, capacity).
    acquire_outcome acquire(waiter_id who, std::chrono::milliseconds timeout,
                            std::optional<double> lease_s, clock::time_point now);
    // The reply carrying a kernel could not be delivered: nobody saw it, it is warm again.
    void return_unseen(const std::string& id, clock::time_point now);
    status release(const std::string& id, clock::time_point now);
    // A leased kernel's lease runs `lease_s` from now (a holder that is still using it says so).
    status renew(const std::string& id, double lease_s, clock::time_point now);

    void on_spawned(const std::string& id, int pid);
    void on_warm(const std::string& id, const protocol::connection_info& info,
                 const std::string& connection_file, clock::time_point now);
    void on_start_failed(const std::string& id, const std::string& reason, clock::time_point now);
    void on_exited(const std::string& id, const std::string& reason, clock::time_point now);
    // An acquire answered with a kernel, `seconds` after the request.
    void record_acquire_latency(double seconds) { m_acquire_seconds.add(seconds); }

    // A warm kernel missed its heartbeat: stopped and replaced, never handed out.
    void on_unresponsive(const std::string& id, const std::string& reason, clock::time_point now);

    // Several start failures in a row: acquires that find no warm kernel fail at once with
    // `unavailable` instead of waiting out their timeout. Starts keep being retried (with
    // backoff), and the first kernel to become warm ends it.
    bool failing() const { return m_consecutive_failures >= failing_after; }
    static constexpr int failing_after = 3;

    // Times out waiters, expires leases, starts kernels whose backoff ended.
    void expire(clock::time_point now);
    // When expire() next has work to do, if ever.
    std::optional<clock::time_point> next_deadline() const;

    // Starts kernels until warm + starting covers size plus waiters, within the limits.
    void refill(clock::time_point now);

    // Fails every waiter with shutting_down and stops every kernel. No refills afterwards.
    void shut_down(clock::time_point now);

    // Live reconfiguration (SIGHUP, and the resize/drain ops). None of these touches a leased
    // kernel: it runs on until released or its lease expires.
    //
    // A new config for this pool. Warm kernels stay, unless `replace_warm` (they were started
    // differently: another kernelspec or kernel.json, transport, ip, limits, startup_code,
    // launcher or python; reload.cpp decides), then the unleased ones are replaced. A smaller size
    // stops the surplus, a larger one starts the difference.
    void reconfigure(config::pool_config cfg, bool replace_warm, clock::time_point now);
    void resize(int size, clock::time_point now);
    // The unleased kernels (warm and starting) stopped and started again, as they are started
    // now: their launcher has something new in it (a zygote that pre-imports more).
    void replace_unleased(clock::time_point now);
    // Size 0, every warm and starting kernel stopped, waiters and new acquires refused with
    // `unavailable` until the next resize.
    void drain(clock::time_point now);
    bool drained() const { return m_drained; }
    // The pool was removed from the config: like drain, for good. Its object lives on while
    // leased kernels remain.
    void retire(clock::time_point now);
    bool retired() const { return m_retired; }
    bool empty() const { return m_kernels.empty(); }

    // What status reports (daemon/service/status_json.hpp) beyond the above.
    int consecutive_failures() const { return m_consecutive_failures; }
    const autosizer* auto_sizer() const { return m_auto ? &*m_auto : nullptr; }
    const recent_samples& recent_acquire_seconds() const { return m_acquire_seconds; }
    const recent_samples& recent_warm_seconds() const { return m_warm_seconds; } // launch to warm

private:
    struct queued_acquire {
        waiter_id id;
        clock::time_point deadline;
        std::optional<double> lease_s;
    };

    kernel_entry& lease(kernel_entry& k, std::optional<double> lease_s, clock::time_point now);
    kernel_entry* oldest_warm();
    void serve_waiters(clock::time_point now);
    void record_failure(const std::string& reason, clock::time_point now);
    error unavailable_error(clock::time_point now) const;
    void fail_waiters(const error& err);
    // Stops unleased kernels (starting ones first, then warm) until warm + starting <= keep.
    void stop_surplus(int keep, clock::time_point now);
    // size = "auto": a new target from the autosizer, applied.
    void autosize(clock::time_point now);
    void set_state(kernel_entry& k, kernel_state s, clock::time_point now);
    void stop(kernel_entry& k, clock::time_point now);

    config::pool_config m_cfg;
    kernel_budget& m_budget;
    kernel_driver& m_driver;
    waiter_sink& m_waiter_sink;
    std::function<std::string()> m_make_id;

    std::map<std::string, kernel_entry> m_kernels;
    std::deque<queued_acquire> m_waiters;
    pool_counters m_counters;
    recent_samples m_acquire_seconds;
    std::optional<autosizer> m_auto; // size = "auto" (until a resize fixes the size)
    std::optional<clock::time_point> m_auto_check;
    recent_samples m_warm_seconds; // launch to warm
    int m_consecutive_failures = 0;
    std::optional<clock::time_point> m_backoff_until;
    // The driver could not start a kernel for want of resources (file descriptors): not the
    // kernelspec's fault, so no failure is counted, but acquires get `capacity` meanwhile.
    std::string m_resource_shortage;
    bool m_shutting_down = false;
    bool m_drained = false;
    bool m_retired = false;
};

} // namespace kpool::daemon
