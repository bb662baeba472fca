// What a client that sends execute_requests and follows them to their end looks like to the code
// that moves messages: one execution (single_execution, below) or a notebook's cells, several
// of them at the kernel at once (runner::cell_pipeline). Pure: it sends through the function it
// was given and learns everything else from the calls below; jupyter::drive pumps it with a
// blocking receive (`kpool run`, `kpool exec`), kpool serve's kernel_session from its event loop.
#pragma once

#include "jupyter/execution_tracker.hpp"
#include "jupyter/kernel_client.hpp"

#include <chrono>
#include <functional>
#include <optional>
#include <string>

namespace kpool::jupyter {

// Sends an execute_request for `request` on the kernel's shell channel; returns its msg_id.
using send_execute_fn = std::function<std::string(const execute_request& request)>;

class execution_driver {
public:
    using clock = std::chrono::steady_clock;
    virtual ~execution_driver() = default;

    // Sends the first requests.
    virtual void start(clock::time_point now) = 0;
    // A message from the kernel's shell or iopub channel (any: the driver keeps what is its own).
    virtual void on_message(const incoming& in, clock::time_point now) = 0;
    // Time passing: true when the kernel should be interrupted now (a time limit passed, or
    // `cancelled` turned true).
    virtual bool on_tick(clock::time_point now, bool cancelled) = 0;
    // The kernel is gone: whatever runs ends as it stands.
    virtual void kernel_died(clock::time_point now) = 0;
    virtual bool finished(clock::time_point now) const = 0;
    // When on_tick next has something to decide, or nothing.
    virtual std::optional<clock::time_point> next_deadline() const = 0;
};

// One execute_request followed to its end (execution_tracker), its iopub messages handed on.
class single_execution final : public execution_driver {
public:
    single_execution(send_execute_fn send, execute_request request,
                     std::function<void(const protocol::wire_message&)> on_iopub);

    void start(clock::time_point now) override;
    void on_message(const incoming& in, clock::time_point now) override;
    bool on_tick(clock::time_point now, bool cancelled) override;
    void kernel_died(clock::time_point now) override;
    bool finished(clock::time_point now) const override;
    std::optional<clock::time_point> next_deadline() const override;

    const execution& result() const;

private:
    send_execute_fn m_send;
    execute_request m_request;
    std::function<void(const protocol::wire_message&)> m_on_iopub;
    std::optional<execution_tracker> m_tracker;
};

// Starts `driver` and pumps `client`'s messages into it until it has finished, as jupyter::execute
// does for one request: `hooks.alive` asked after a second of silence, `hooks.interrupt` when the
// driver says so, `hooks.cancelled` after every wake-up (hooks.on_iopub is not used: the driver
// hands on what it keeps).
void drive(kernel_client& client, execution_driver& driver, const execute_hooks& hooks);

} // namespace kpool::jupyter
