// What every request that runs code does around its code: take a fresh kernel (a connected spare,
// else a warm one from kpoold; 429 when none comes in time), apply the request's cwd/env (kpoold's
// context op) while its iopub subscription is proven, interrupt it at a time limit, watch that
// it lives and that the caller is still there, answer exactly once, and give the kernel back.
// exec_call and run_call say what runs.
// Owns itself (shared) until kpoold has the kernel back, whatever happened to the caller.
#pragma once

#include "loop/uv_timer.hpp"
#include "serve/http_server.hpp"
#include "serve/kernel_leases.hpp"
#include "serve/kernel_session.hpp"
#include "serve/spare_kernels.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace kpool::serve {

class request_services;

struct kernel_wish {
    std::string pool;
    std::string cwd; // empty: the kernel's own
    std::map<std::string, std::string> env;
    std::optional<std::chrono::milliseconds> timeout; // the whole run's, for the lease
    // A one-shot run's history, in memory as papermill's (protocol/PROTOCOL.md, "history").
    bool memory_history = true;
};

class kernel_call : public std::enable_shared_from_this<kernel_call> {
public:
    kernel_call(request_services& owner, exchange_ptr exchange, std::string route,
                std::chrono::steady_clock::time_point arrived);
    virtual ~kernel_call() = default;

    // Acquires a kernel for `wish`, then calls run() once it is ready.
    void begin(const kernel_wish& wish);
    // kpool serve is stopping and its grace is over: the code running is interrupted and the
    // request answered 503 (a request still waiting for a kernel ends within the queue timeout).
    void stop();

protected:
    // The kernel is ready: session() works, and its iopub subscribed
    // (kernel_session::when_subscribed).
    virtual void run() = 0;
    // Whether run() needs session().kernel_info() of a newly acquired kernel (a spare's came
    // long before): then the handshake waits for the reply too.
    virtual bool needs_kernel_info() const { return false; }
    kernel_session& session() { return *m_session; }
    // Interrupts the kernel (kpoold's signal op: SIGINT, or an interrupt_request).
    void interrupt();
    // Milliseconds the request waited for its kernel (all its time when none came yet): every
    // answer's Kpool-Queued-Ms.
    long long queued_ms() const;
    // Answers (once) and gives the kernel back; the request is over when kpoold has it.
    void finish(http_response response);
    // The answer for code stopped before its end: the caller went away, or kpool serve stopped.
    http_response cancelled_response() const;
    request_services& owner() { return m_owner; }
    const exchange_ptr& exchange() const { return m_exchange; }
    // A dead kernel's message, with kpoold's word on why when it gave one ("out of memory ...").
    std::string with_death_reason(std::string message) const {
        return m_death_reason.empty() ? message : message + ": " + m_death_reason;
    }

private:
    void acquire();
    void on_acquired(result<kernel_lease> lease, const kernel_leases::refusal_fn& refusal);
    void take_spare(spare_kernels::spare spare);
    // The kernel is ours: the handshake (unless `subscribed`), the cwd/env/history (unless the
    // acquire applied them) and `other_steps` (a spare's renew) at once; then run().
    void prepare(bool subscribed, int other_steps, bool context_applied);
    void prepared(unsigned attempt); // one of prepare()'s steps is done
    // Lets go of a kernel before any code ran on it (a spare found gone), without answering.
    void give_back();
    void took_kernel();
    void poll();

    request_services& m_owner;
    exchange_ptr m_exchange;
    std::string m_route;
    std::chrono::steady_clock::time_point m_arrived;
    kernel_wish m_wish;
    int m_steps_left = 0; // prepare()'s
    unsigned m_attempt =
        0; // the kernel's (a spare found gone gives way to another): stale replies are ignored
    kernel_lease m_lease; // kernel_id empty: none held
    std::chrono::steady_clock::time_point
        m_taken_at; // when m_lease was taken (wait_estimate's hold times)
    // A spare taken without a time limit keeps kpool serve's holder lease, renewed while the call
    // runs; otherwise the lease the acquire (or the spare's renew) asked for.
    bool m_renews = false;
    lease_watch m_watch;
    std::unique_ptr<kernel_session> m_session;
    std::string m_death_reason; // from the poll that found the kernel gone
    loop::uv_timer m_poll;
    bool m_finished = false;
    bool m_stopped = false;
};

} // namespace kpool::serve
