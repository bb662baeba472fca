// kpool run's command line, read: papermill's options and kpool's own (the usage text is
// run_command.hpp's), and the parameters merged in papermill's order. For the local run
// (run_command.cpp) and the remote one through a kpool serve (remote_run.cpp).
#pragma once

#include "params/values.hpp"
#include "remote/feeder.hpp"
#include "runner/notebook_runner.hpp"

#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kpool::cli {

struct usage_failure {
    std::string message;
};

struct parsed_run {
    runner::run_options options;
    std::vector<std::string> paths;
    std::string output_dir;
    int jobs = 1;
    std::optional<bool> progress_bar; // papermill's default: on unless --log-output
    bool help_notebook = false;
    bool inject_input = false;
    bool inject_output = false;
    std::string log_level = "INFO";
    // Parameters in papermill's merge order, whatever the order on the command line.
    std::vector<std::string> base64_texts, yaml_files, yaml_texts;
    std::vector<std::pair<std::string, std::string>> typed, raw;
    // --url's (cli/remote_options.hpp): through a kpool serve instead of kpoold.
    remote::feed_settings remote;
    std::string token_file;
};

// The words after "run", read; a usage_failure (or usage_error) says what is wrong.
parsed_run parse_run_args(const std::vector<std::string>& args);

// papermill's order: the injected paths, every -b, every -f, every -y, then -p, then -r.
params::parameters merge_parameters(const parsed_run& r, const std::string& input,
                                    const std::string& output);

// The exit status of a run's outcome (README, "Exit status").
int exit_status_of(runner::run_outcome outcome);

// Python logging's levels by name, which papermill's --log-level takes.
const std::map<std::string, int>& log_levels();

} // namespace kpool::cli
