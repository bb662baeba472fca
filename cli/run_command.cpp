// kpool run: one notebook, or many N at a time, on kernels from kpoold (with --url, through a
// kpool serve: remote_run.cpp).
#include "cli/run_command.hpp"

#include "cli/commands.hpp"
#include "cli/exit_status.hpp"
#include "cli/remote_options.hpp"
#include "cli/remote_run.hpp"
#include "cli/run_args.hpp"
#include "cli/stop_signals.hpp"
#include "kpool/version.hpp"
#include "runner/notebook_help.hpp"

#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

namespace kpool::cli {
namespace {

namespace fs = std::filesystem;

int run_many(const std::vector<std::string>& endpoints, const client::curve_keys& keys,
             const parsed_run& r) {
    std::error_code ec;
    fs::create_directories(r.output_dir, ec);
    const auto started = std::chrono::steady_clock::now();
    std::atomic<std::size_t> next{0};
    std::atomic<int> failed{0};
    std::atomic<std::size_t> finished{0};
    std::mutex print;
    auto worker = [&] {
        client::daemon_set daemons(endpoints, keys);
        // After Ctrl-C the running notebooks are interrupted and no new one starts.
        for (std::size_t i; !stop_requested() && (i = next++) < r.paths.size();) {
            runner::run_options options = r.options;
            options.input = r.paths[i];
            options.output = (fs::path(r.output_dir) / fs::path(r.paths[i]).filename()).string();
            options.progress = false;
            options.log_level = std::max(options.log_level, 30); // a summary line each instead
            runner::run_result result;
            try {
                options.parameters = merge_parameters(r, options.input, options.output);
                result = runner::run_notebook(daemons, options, stderr);
            } catch (const usage_failure& e) {
                std::fprintf(stderr, "kpool: %s\n", e.message.c_str());
                result = {runner::run_outcome::bad_input, e.message};
            }
            const int status = exit_status_of(result.outcome);
            if (status != exit_status::ok) {
                ++failed;
            }
            ++finished;
            std::lock_guard lock(print);
            std::printf("%s -> %s: %s\n", options.input.c_str(), options.output.c_str(),
                        status == exit_status::ok
                            ? result.summary.c_str()
                            : ("failed (exit " + std::to_string(status) +
                               (result.summary.empty() ? "" : ": " + result.summary) + ")")
                                  .c_str());
            std::fflush(stdout);
        }
    };
    std::vector<std::thread> threads;
    for (int j = 0; j < std::min<int>(r.jobs, static_cast<int>(r.paths.size())); ++j) {
        threads.emplace_back(worker);
    }
    for (auto& t : threads) {
        t.join();
    }
    // The total, after the line of each notebook: what a batch's log ends with.
    const std::size_t not_run = r.paths.size() - finished;
    std::printf("%zu notebooks: %zu ok, %d failed%s in %.1f s\n", r.paths.size(),
                finished - static_cast<std::size_t>(failed.load()), failed.load(),
                not_run == 0 ? ""
                             : (", " + std::to_string(not_run) + " not run (interrupted)").c_str(),
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    std::fflush(stdout);
    if (stop_requested()) {
        return exit_status::interrupted;
    }
    return failed == 0 ? exit_status::ok : exit_status::failed;
}

} // namespace

int run_command(const std::string& endpoint, const client::curve_keys& keys,
                const std::vector<std::string>& args, bool daemon_named, const std::string& url) {
    parsed_run r;
    try {
        r = parse_run_args(args);
        r.options.daemon_named = daemon_named;
        r.options.log_level = log_levels().at(r.log_level);
        if (r.help_notebook) {
            return runner::print_notebook_help(r.paths.empty() ? "-" : r.paths[0], r.options.kernel,
                                               r.options.language, stdout, stderr);
        }
        if (r.output_dir.empty()) {
            r.options.input = r.paths[0];
            r.options.output = r.paths[1];
            r.options.parameters = merge_parameters(r, r.options.input, r.options.output);
        }
        if (!url.empty() && !r.options.prepare_only) { // (preparing needs no kernel, nor a server)
            resolve_remote(url, r.token_file, r.remote);
            return run_remote(r);
        }
    } catch (const usage_failure& e) {
        std::fprintf(stderr, "kpool: %s\n\n%s", e.message.c_str(), run_usage);
        return exit_status::usage;
    } catch (const usage_error& e) {
        std::fprintf(stderr, "kpool: %s\n\n%s", e.message.c_str(), run_usage);
        return exit_status::usage;
    }
    auto endpoints = client::parse_endpoints(endpoint);
    if (!endpoints) {
        std::fprintf(stderr, "kpool: %s\n", endpoints.err().message.c_str());
        return exit_status::usage;
    }
    catch_stop_signals();
    r.options.cancelled = stop_requested;
    if (!r.output_dir.empty()) {
        return run_many(*endpoints, keys, r);
    }
    if (r.options.output == "-") {
        // papermill: the notebook goes to stdout once, at the end, and only errors are logged.
        r.options.save_after_each_cell = false;
        if (r.options.log_level == 20) {
            r.options.log_level = 40;
        }
    }
    const bool bar = r.progress_bar.value_or(!r.options.log_output);
    r.options.progress = bar && r.options.output != "-" && ::isatty(STDERR_FILENO) != 0;
    client::daemon_set daemons(*endpoints, keys);
    const runner::run_outcome outcome = runner::run_notebook(daemons, r.options, stderr).outcome;
    if (outcome == runner::run_outcome::interrupted) {
        // papermill's (click's) answer to Ctrl-C: "Aborted!" and exit 1. The kernel was
        // interrupted and released, OUTPUT written.
        std::fprintf(stderr, "Aborted!\n");
        return exit_status::failed;
    }
    return exit_status_of(outcome);
}

int run_command_line(const invocation& inv) {
    for (const std::string& w : inv.raw) {
        if (w == "-h" || w == "--help") {
            std::fputs(run_usage, stdout);
            return exit_status::ok;
        }
        if (w == "--version") {
            std::printf("kpool %s (kpool run: papermill 2.6.0's command line)\n", kpool::version);
            return exit_status::ok;
        }
    }
    if (!inv.url.empty()) { // through a kpool serve: no daemon, no keys
        return run_command(inv.endpoint, {}, inv.raw, inv.endpoint_given, inv.url);
    }
    return run_command(inv.endpoint, inv.keys(), inv.raw, inv.endpoint_given);
}

} // namespace kpool::cli
