// `kpool run` for one notebook: read and parameterize it, take a warm kernel from kpoold, run the
// cells as nbclient does (papermill's bookkeeping around them), write OUTPUT atomically after every
// cell, release the kernel. What it prints goes to the `log` stream (stderr), except the
// notebook itself when OUTPUT is "-".
#pragma once

#include "client/daemon_set.hpp"
#include "params/values.hpp"
#include "runner/cell_pipeline.hpp"
#include "runner/notebook_engine.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace kpool::runner {

struct run_options {
    std::string input;  // a path, or "-" for stdin
    std::string output; // a path, or "-" for stdout (written once, at the end)
    std::string pool;   // empty: chosen by kernel or by the notebook's kernelspec
    // --endpoint or $KPOOL_ENDPOINT named the daemon: if it does not answer, the run fails
    // (unreachable) rather than falling back to a local kernel, which is only for the default.
    bool daemon_named = false;
    std::string kernel;   // -k: the pool whose kernelspec this is
    std::string language; // -l: the parameters' language, whatever the notebook says
    // The kernel's working directory; relative to this process's. Default: this process's, as
    // papermill's kernel inherits it.
    std::optional<std::string> cwd;
    // On top of this process's environment, which the kernel sees as papermill's would
    // (caller_environment() says which variables are left out).
    std::map<std::string, std::string> env;
    std::chrono::milliseconds start_timeout{60000};
    std::optional<std::chrono::milliseconds> execution_timeout; // per cell
    params::parameters parameters = params::parameters::object();
    bool allow_errors = false;
    bool prepare_only = false;
    bool report_mode = false;         // inputs hidden, as papermill's --report-mode
    bool save_after_each_cell = true; // papermill's request_save_on_cell_execute
    // How many of the notebook's execute_requests may wait at the kernel at once, where the
    // kernel stops at an error by itself (runner/cell_pipeline); 1: one at a time.
    std::size_t cells_ahead = default_cells_ahead;
    // During a long cell, OUTPUT is saved again when a message arrives this long after the last
    // save (papermill's autosave_cell_every; 0: never).
    std::chrono::seconds autosave_every{30};
    bool progress = false; // a progress line on the log stream
    // papermill's --log-output: "Executing Cell N---" banners, and every cell's streams and
    // text/plain results, on the log stream.
    bool log_output = false;
    // Every stdout (stderr) stream output written here too, as it arrives.
    std::optional<std::string> stdout_file;
    std::optional<std::string> stderr_file;
    // Python logging's levels (10 DEBUG ... 50 CRITICAL): what reaches the log stream. INFO:
    // "Input Notebook:" and such; WARNING: warnings; ERROR: the failure report.
    int log_level = 20;
    // Asked while a cell runs: true when the caller gives up (the kernel is interrupted, OUTPUT
    // written, the run ends as `interrupted`).
    std::function<bool()> cancelled = [] { return false; };
};

struct run_result {
    run_outcome outcome = run_outcome::ok;
    std::string summary; // one line: how it ended
};

run_result run_notebook(client::daemon_set& daemons, const run_options& options, std::FILE* log);

// What `kpool run` says of a cell that raised (its first error output): "kpool: INPUT: cell
// INDEX (In [N]) raised ENAME: EVALUE" and the traceback as text. Remote runs say the same.
void report_error(std::FILE* log, const std::string& input, const nlohmann::json& cell,
                  std::size_t index);

// This process's environment as the kernel should see it, without what describes a kernel
// process rather than the caller: JPY_PARENT_PID and KPOOL_INSTANCE (the kernel's own parent
// and daemon run), PWD and OLDPWD (the kernel's cwd is set by cwd), SHLVL and _ (the shell's
// bookkeeping).
std::map<std::string, std::string> caller_environment();

} // namespace kpool::runner
