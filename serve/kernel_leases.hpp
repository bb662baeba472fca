// The life of every kernel kpool serve holds (a /v1 call's, a spare, a Kernel Gateway kernel) as
// control calls to kpoold: acquire, cwd/env, renewal, liveness, interrupt, release; and the
// lease policy all three follow. A change of lease policy is a change in this file's .cpp:
// - a /v1 call with a time limit leases for that limit and a minute, unrenewed;
// - every other kernel held (a spare, a gateway kernel, a /v1 call's without a time limit)
//   leases for `holder_lease` and is renewed at a third of it, so it outlives a crashed kpool
//   serve by one lease at most;
// - a held kernel is gone when kpoold says so (exited, or not known) or three polls in a row go
//   unanswered: kernels die with their daemon (serve/held_kernels.hpp polls on one tick);
// - kpoold's refusals become HTTP answers in one way (acquire_refusal, context_refusal).
#pragma once

#include "protocol/control.hpp"
#include "protocol/result.hpp"
#include "serve/connected_kernel.hpp"
#include "serve/control_service.hpp"
#include "serve/http_response.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace kpool::serve {

// What a holder keeps per kernel to follow its lease and liveness.
struct lease_watch {
    std::chrono::steady_clock::time_point renewed = std::chrono::steady_clock::now();
    int unanswered_polls = 0; // in a row
};

// How a held kernel's lease runs: `fixed_s` seconds, never renewed; none: the holder lease,
// renewed while the kernel is held.
struct lease_terms {
    std::optional<double> fixed_s;
    bool renewed() const { return !fixed_s; }
};

class kernel_leases {
public:
    kernel_leases(control_service& daemons, std::chrono::seconds holder_lease);

    std::chrono::seconds holder_lease() const { return m_holder_lease; }
    // A /v1 call's terms for a run limited to `timeout` (none: no limit).
    static lease_terms call_terms(std::optional<std::chrono::milliseconds> timeout);
    // Every other holder's.
    static lease_terms holder_terms() { return {}; }
    // The lease to ask kpoold for under `terms`.
    double lease_s(const lease_terms& terms) const {
        return terms.fixed_s.value_or(static_cast<double>(m_holder_lease.count()));
    }

    // A warm kernel from any daemon, waiting at most `args.timeout_ms` (the control request
    // itself a margin longer). `done` once: the lease, or what makes the answer for the caller
    // (503 when no kpoold answered, a refusal as acquire_refusal maps it; a kernel whose
    // connection is unusable is released and answered 502). The answer is made when asked for,
    // so that a 429's Retry-After counts the requests still waiting once the caller stopped.
    using refusal_fn = std::function<http_response()>;
    using acquired_fn = std::function<void(result<kernel_lease>, refusal_fn refusal)>;
    void acquire(const protocol::acquire_args& args, acquired_fn done);

    // cwd/env/history applied in a held kernel (kpoold's context op). `done` with nullopt once
    // applied, else the answer for the caller; `kernel_gone` says kpoold no longer knows it.
    using context_fn = std::function<void(std::optional<http_response> failure, bool kernel_gone)>;
    void apply_context(const kernel_lease& lease, const std::string& cwd,
                       const std::map<std::string, std::string>& env, bool memory_history,
                       context_fn done);

    // The lease runs for `lease_s` from now; `done(held)`: false when the kernel is gone or its
    // daemon did not answer.
    void renew(const kernel_lease& lease, double lease_s, std::function<void(bool held)> done = {});
    // Renews the holder lease when a third of it has passed since `watch.renewed`.
    void renew_when_due(const kernel_lease& lease, lease_watch& watch);
    // Asks whether the kernel lives; `done` with kpoold's reply, for gone_after.
    void poll(const kernel_lease& lease, std::function<void(result<nlohmann::json>)> done);
    // A poll's reply, counted in `watch`: true once the kernel counts as gone.
    static bool gone_after(lease_watch& watch, const result<nlohmann::json>& poll_reply);
    // SIGINT through kpoold; `done` with why it failed, if it did.
    void interrupt(const kernel_lease& lease,
                   std::function<void(std::optional<std::string> failure)> done = {});
    // Back to kpoold; `done` once it answered (or did not in time).
    void release(const kernel_lease& lease, std::function<void()> done = {});

private:
    control_service& m_daemons;
    std::chrono::seconds m_holder_lease;
};

} // namespace kpool::serve
