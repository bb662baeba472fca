// `kpool run` for one notebook: read and parameterize it, take a warm kernel from kpoold, run the
// cells as nbclient does (papermill's bookkeeping around them), write OUTPUT atomically after every
// cell, release the kernel. What it prints goes to the `log` stream (stderr), except the
// notebook itself when OUTPUT is "-".
#pragma once

#include "client/daemon_set.hpp"
#include "params/values.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <map>
#include <optional>
#include <string>

namespace kpool::runner {

struct run_options {
    std::string input;  // a path, or "-" for stdin
    std::string output; // a path, or "-" for stdout (written once, at the end)
    std::string pool;        // empty: chosen by kernel or by the notebook's kernelspec
    std::string kernel;      // -k: the pool whose kernelspec this is
    std::optional<std::string> cwd; // default: INPUT's directory
    std::map<std::string, std::string> env;
    std::chrono::milliseconds start_timeout{60000};
    std::optional<std::chrono::milliseconds> execution_timeout; // per cell
    params::parameters parameters = params::parameters::object();
    bool allow_errors = false;
    bool prepare_only = false;
    bool progress = false;   // a progress line on the log stream
    bool log_output = false; // cell streams echoed as they arrive
};

struct run_result {
    int exit_status = 0;  // 0, 1 (a cell failed), 2 (bad input), 3, 130, 138
    std::string summary;  // one line: how it ended
};

run_result run_notebook(client::daemon_set& daemons, const run_options& options, std::FILE* log);

} // namespace kpool::runner
