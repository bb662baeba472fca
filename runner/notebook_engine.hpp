// papermill's semantics of executing a prepared notebook, with no I/O: which cell runs next and
// with what execute_request, what each iopub message does to the notebook (outputs, nbclient's
// timing metadata), and what the end of an execution means (papermill's rules for an error,
// sys.exit, a timeout, a dead kernel, a cancel). Two drivers feed it: kpool run's blocking loop
// (notebook_runner.cpp, over jupyter::execute) and kpool serve's event loop (over
// jupyter::execution_tracker). Tests feed it recorded messages.
//
//   while (auto i = engine.next_cell()) {
//       if (auto request = engine.begin_cell(now)) {   // cell_start
//           ... send it; every iopub message of it -> engine.on_iopub(msg);
//           engine.on_executed(execution);             // reply, timeout, death, cancel
//       }
//       engine.end_cell(now);                          // cell_complete
//   }
//   engine.finish(start, now);                         // notebook_complete, error cells
#pragma once

#include "jupyter/kernel_client.hpp"
#include "notebook/outputs.hpp"
#include "runner/papermill.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <optional>
#include <string>

namespace kpool::runner {

enum class run_outcome {
    ok,
    cell_failed, // a cell raised (or timed out); OUTPUT written with the error cells
    refused,     // kpoold said no (no kernel in time, ...)
    bad_input,   // the notebook, the parameters or OUTPUT
    unreachable, // no daemon answered
    interrupted, // the caller gave up; the kernel was interrupted
    kernel_died,
};

// What stopped a run, if anything; `message` is empty for a cell that raised (its error output
// tells) and for a run that went to the end.
struct stop_reason {
    run_outcome outcome = run_outcome::ok;
    std::string message;
};

struct engine_settings {
    bool allow_errors = false; // papermill's --allow-errors: every cell runs whatever raised
    std::optional<std::chrono::milliseconds> execution_timeout; // per cell
};

class notebook_engine {
public:
    // `nb` (in-memory form, prepared: parameters injected, metadata set, markers removed) must
    // outlive the engine; the engine writes the cells' outputs and metadata into it.
    notebook_engine(json& nb, engine_settings settings);

    // The cell to run next, or nothing once every cell ran or the run stopped.
    std::optional<std::size_t> next_cell() const;

    // Starts next_cell() (papermill's cell_start): the request to execute, or nothing for a
    // cell with nothing to run (markdown, blank, tagged skip-execution).
    std::optional<jupyter::execute_request> begin_cell(wall_clock::time_point now);

    // The request cell `index` will be run with, or nothing for a cell with nothing to run;
    // asked before the cell begins (a request sent ahead of its turn), it changes nothing.
    std::optional<jupyter::execute_request> request_for(std::size_t index) const;

    // One iopub message of the running cell's execute_request: timing metadata, and the
    // output it makes (returned; null when it makes none).
    json on_iopub(const protocol::wire_message& msg);

    // How the running cell's execution ended.
    void on_executed(const jupyter::execution& done);

    // papermill's cell_complete for the running cell; the run moves on, or has stopped.
    void end_cell(wall_clock::time_point now);

    std::size_t cell_count() const { return m_nb["cells"].size(); }

    const stop_reason& stop() const { return m_stop; }
    // The cell that raised (and stopped the run), or -1.
    long failed_cell() const { return m_failed; }
    // Whether the cells ran as far as they go without the run being cut off (by a timeout, a
    // dead kernel or an interrupt): papermill asks the kernel for its language_info only then.
    bool ran_through() const { return !m_cut_off; }

    // papermill's notebook_complete and, after a cell that raised, the error marker cells.
    void finish(wall_clock::time_point start, wall_clock::time_point now);

private:
    json& m_nb;
    engine_settings m_settings;
    notebook::output_builder m_outputs;
    std::size_t m_next = 0;
    std::optional<std::size_t> m_running; // begun, not yet ended
    bool m_allow = false;                 // the running cell may raise
    stop_reason m_stop;
    long m_failed = -1;
    bool m_stopped_clean = false; // sys.exit(0): no more cells, the run succeeds
    bool m_cut_off = false;       // a timeout, a dead kernel or an interrupt ended the run
};

} // namespace kpool::runner
