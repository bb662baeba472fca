// What every request that runs code does around its code: take a fresh kernel with the request's
// cwd/env (serve/held_kernels.hpp: a connected spare, else a warm one from kpoold; 429 when none
// comes in time), interrupt it at a time limit, stop when it dies or the caller goes away,
// answer exactly once, and give the kernel back. exec_call and run_call say what runs.
// Owns itself (shared) until kpoold has the kernel back, whatever happened to the caller.
#pragma once

#include "serve/held_kernels.hpp"
#include "serve/http_server.hpp"
#include "serve/kernel_leases.hpp"
#include "serve/kernel_session.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <memory>
#include <optional>
#include <string>

namespace kpool::serve {

class request_services;

class kernel_call : public std::enable_shared_from_this<kernel_call> {
public:
    kernel_call(request_services& owner, exchange_ptr exchange, std::string route,
                std::chrono::steady_clock::time_point arrived);
    virtual ~kernel_call() = default;

    // Obtains a kernel for `order` (a caller's: its pool, cwd/env, history and lease terms;
    // the rest is set here), then calls run() once it is ready.
    void begin(kernel_order order);
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
    void on_obtained(obtained kernel);
    void took_kernel();

    request_services& m_owner;
    exchange_ptr m_exchange;
    std::string m_route;
    std::chrono::steady_clock::time_point m_arrived;
    std::string m_pool;
    lease_terms m_terms;
    kernel_lease m_lease; // kernel_id empty: none held
    // When m_lease was taken (wait_estimate's hold times).
    std::chrono::steady_clock::time_point m_taken_at;
    kernel_watch m_watch; // while the code runs: the kernel's life and the caller's
    std::unique_ptr<kernel_session> m_session;
    std::string m_death_reason; // from the poll that found the kernel gone
    bool m_finished = false;
    bool m_stopped = false;
};

} // namespace kpool::serve
