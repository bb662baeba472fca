// `kpool exec`: one snippet in a warm kernel from the pool, its outputs on this terminal.
//
// stdout and stderr streams go live to the same streams, execute_result and display_data as
// their text/plain on stdout, an error's traceback on stderr (exit 1); --json prints the outputs
// as nbformat output objects instead. The kernel is always released. Exit status: 0 ok, 1 the
// code raised (or timed out), 2 bad usage, 3 kpoold unreachable, 130 interrupted (SIGINT or
// SIGTERM: the kernel is interrupted too), 138 the kernel died; Python code that calls
// sys.exit(N) exits N, quietly, as `python -c` does.
#pragma once

#include "client/daemon_set.hpp"

#include <map>
#include <optional>
#include <string>

namespace kpool::cli {

struct exec_options {
    std::string pool = "python3";
    std::optional<std::string> cwd;
    std::map<std::string, std::string> env;
    std::optional<double> timeout_s; // the code's time limit
    bool as_json = false;
    std::string code;
};

int exec_command(client::daemon_set& daemons, const exec_options& options);

} // namespace kpool::cli
