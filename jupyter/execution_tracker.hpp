// What one execute_request has come to, as messages arrive: pure bookkeeping, no sockets. It ends
// when the execute_reply is in and iopub has gone idle for the request (so every output was seen,
// as nbclient waits), or when waiting longer makes no sense: the time limit passed and the
// interrupt went unanswered, the caller gave up, the kernel died, or a reply came without its
// idle. jupyter::execute drives it with a blocking receive; kpool serve from its event loop.
#pragma once

#include "jupyter/kernel_client.hpp"

#include <chrono>
#include <optional>
#include <string>

namespace kpool::jupyter {

class execution_tracker {
public:
    using clock = std::chrono::steady_clock;

    // `msg_id` is the execute_request's; `timeout` its time limit, counted from `now`.
    execution_tracker(std::string msg_id, std::optional<std::chrono::milliseconds> timeout,
                      clock::time_point now);

    // Whether `in` belongs to this execution (its parent is the request). An iopub message that
    // does is the caller's to apply (outputs); the reply and the idle status are recorded here.
    bool on_message(const incoming& in, clock::time_point now);

    // Time passing: true when the kernel should be interrupted now (the time limit passed, or
    // `cancelled` turned true); each reason interrupts once.
    bool on_tick(clock::time_point now, bool cancelled);

    // The time limit counts from `now` instead: a request sent ahead of its turn starts its
    // clock when the kernel gets to it, not while it waits behind another.
    void count_limit_from(clock::time_point now);

    // The kernel is gone: the execution ends as it stands.
    void kernel_died();

    bool finished(clock::time_point now) const;
    // When on_tick next has something to decide (the time limit, the end of a grace period),
    // or nothing: then only a message or a cancel changes anything.
    std::optional<clock::time_point> next_deadline() const;

    const std::string& msg_id() const { return m_id; }
    const execution& result() const { return m_out; }

private:
    std::string m_id;
    execution m_out;
    bool m_idle = false;
    std::optional<std::chrono::milliseconds> m_timeout;
    std::optional<clock::time_point> m_limit;
    // After an interrupt (or once the reply is in) the rest must come soon.
    std::optional<clock::time_point> m_grace_end;
};

// The content of an execute_request for `request`.
nlohmann::json execute_request_content(const execute_request& request);

} // namespace kpool::jupyter
