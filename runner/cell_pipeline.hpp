// A notebook's cells through one kernel with the next ones already waiting at the kernel, so that
// it goes from one cell to the next without waiting for us (issue #49: 2-3 ms of idle kernel per
// cell, one cell at a time). notebook_engine still sees one cell at a time, in order: the
// messages of a cell sent ahead are held until the cell before it has ended, then the cell
// begins and they are applied, so the notebook written is the one a cell-at-a-time run writes.
//
// Sending ahead is safe only where papermill's stop at the first error still holds: the kernel
// must abort the requests queued behind one that raised (ipykernel with stop_on_error; a fact
// of languages/ by kernel_info's `implementation`), and nothing is sent behind a request that
// may raise without stopping (allow_errors, a `raises-exception` cell) until it has ended: an
// interrupt at its time limit would end it without aborting what waits. ipykernel aborts only
// what has arrived when the error is sent, plus what arrives within stop_on_error_timeout (0 s
// by default), so a request sent just before an error could arrive just after it and run: the
// first cell carries the language's user expression that widens that window, and the cells
// behind it go once its reply says the expression was evaluated. Other kernels, and a kernel
// whose kernel_info is not known yet, get one cell at a time, as nbclient sends them.
//
// The clock of a cell's time limit starts when it begins (the cell before it has ended), not
// when it was sent. Pure: it sends through the function it is given (a blocking client's in
// `kpool run`, an event loop's in kpool serve).
#pragma once

#include "jupyter/execution_driver.hpp"
#include "runner/notebook_engine.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kpool::runner {

// How many execute_requests may be at the kernel at once by default, the running cell's
// included (bench/ scenario 21 sets it against 1, 2 and 64).
inline constexpr std::size_t default_cells_ahead = 4;

struct pipeline_hooks {
    // The kernel's kernel_info_reply content, or null while it has not come (then cells go one
    // at a time until it has).
    std::function<const nlohmann::json&()> kernel_info;
    // After notebook_engine::begin_cell (papermill's cell_start) and end_cell (cell_complete).
    std::function<void(std::size_t cell)> began;
    std::function<void(std::size_t cell)> ended;
    // Each iopub message of the running cell once notebook_engine applied it, with the output
    // it made (null when none).
    std::function<void(const protocol::wire_message& msg, const nlohmann::json& output)> iopub;
};

// What the kernel of `kernel_info` allows: the user expression that widens its abort window
// (empty: none needed), or nothing when it must get one cell at a time.
struct run_ahead_plan {
    std::string abort_window_expression;
};
std::optional<run_ahead_plan> run_ahead_for(const nlohmann::json& kernel_info);

class cell_pipeline final : public jupyter::execution_driver {
public:
    // `window`: the most requests at the kernel at once (1: one cell at a time, nbclient's way).
    cell_pipeline(notebook_engine& engine, jupyter::send_execute_fn send, std::size_t window,
                  pipeline_hooks hooks);

    void start(clock::time_point now) override;
    void on_message(const jupyter::incoming& in, clock::time_point now) override;
    bool on_tick(clock::time_point now, bool cancelled) override;
    void kernel_died(clock::time_point now) override;
    bool finished(clock::time_point) const override { return m_finished; }
    std::optional<clock::time_point> next_deadline() const override;

    // How many requests went ahead of their turn (for tests and logs).
    std::size_t sent_ahead() const { return m_sent_ahead; }

private:
    struct in_flight {
        std::size_t cell;
        bool stops_on_error; // the kernel aborts what is queued behind it if it raises
        jupyter::execution_tracker tracker;
        std::vector<protocol::wire_message> held; // its iopub messages, until it begins
    };

    // Ends the running cell if it is over, begins the next ones, sends what may go now.
    void advance(clock::time_point now);
    void send_more(clock::time_point now);
    // Whether requests may queue behind the ones sent; decided once kernel_info is known.
    bool may_send_ahead();
    static constexpr const char* window_expression_name = "kpool_abort_window";

    notebook_engine& m_engine;
    jupyter::send_execute_fn m_send;
    std::size_t m_window;
    pipeline_hooks m_hooks;
    std::deque<in_flight> m_sent; // in the kernel's order; the front is the running cell once begun
    bool m_front_begun = false;
    std::size_t m_scan = 0;               // the first cell not yet sent nor passed over
    bool m_decided = false;               // kernel_info was known
    std::optional<run_ahead_plan> m_plan; // what it allows, if anything
    bool m_window_widened = false;        // a reply said the abort window expression ran
    std::size_t m_sent_ahead = 0;
    bool m_finished = false;
};

} // namespace kpool::runner
