// kpool run: arguments, parameter merging, and running many notebooks N at a time.
#include "cli/run_command.hpp"

#include "client/leased_kernel.hpp"
#include "params/values.hpp"
#include "runner/notebook_runner.hpp"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <sstream>
#include <thread>

namespace kpool::client {
namespace {

namespace fs = std::filesystem;

struct usage_failure {
    std::string message;
};

struct parsed_run {
    runner::run_options options;
    std::vector<std::string> paths;
    std::string output_dir;
    int jobs = 1;
    bool no_progress = false;
    // Parameters in papermill's merge order, whatever the order on the command line.
    std::vector<std::string> yaml_files, yaml_texts;
    std::vector<std::pair<std::string, std::string>> typed, raw;
};

double seconds(const std::string& text, const std::string& what) {
    try {
        std::size_t used = 0;
        const double v = std::stod(text, &used);
        if (used == text.size() && v > 0) {
            return v;
        }
    } catch (const std::exception&) {
    }
    throw usage_failure{what + " takes a number of seconds above 0, not '" + text + "'"};
}

std::chrono::milliseconds to_ms(double s) {
    return std::chrono::milliseconds(static_cast<std::int64_t>(s * 1000));
}

parsed_run parse(const std::vector<std::string>& args) {
    parsed_run r;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto next = [&](int n = 1) -> const std::string& {
            if (i + static_cast<std::size_t>(n) >= args.size()) {
                throw usage_failure{a + " needs " + (n == 1 ? "a value" : "NAME and VALUE")};
            }
            i += static_cast<std::size_t>(n);
            return args[i];
        };
        if (a == "--pool") {
            r.options.pool = next();
        } else if (a == "-k" || a == "--kernel") {
            r.options.kernel = next();
        } else if (a == "--cwd") {
            r.options.cwd = next();
        } else if (a == "--env") {
            const std::string kv = next();
            const auto eq = kv.find('=');
            if (eq == std::string::npos || eq == 0) {
                throw usage_failure{"--env takes NAME=VALUE, not '" + kv + "'"};
            }
            r.options.env[kv.substr(0, eq)] = kv.substr(eq + 1);
        } else if (a == "-p" || a == "--parameters") {
            next(2);
            r.typed.emplace_back(args[i - 1], args[i]);
        } else if (a == "-r" || a == "--parameters_raw") {
            next(2);
            r.raw.emplace_back(args[i - 1], args[i]);
        } else if (a == "-y" || a == "--parameters_yaml") {
            r.yaml_texts.push_back(next());
        } else if (a == "-f" || a == "--parameters_file") {
            r.yaml_files.push_back(next());
        } else if (a == "--start-timeout") {
            r.options.start_timeout = to_ms(seconds(next(), a));
        } else if (a == "--execution-timeout") {
            r.options.execution_timeout = to_ms(seconds(next(), a));
        } else if (a == "--allow-errors") {
            r.options.allow_errors = true;
        } else if (a == "--prepare-only") {
            r.options.prepare_only = true;
        } else if (a == "--log-output") {
            r.options.log_output = true;
        } else if (a == "--no-progress") {
            r.no_progress = true;
        } else if (a == "--output-dir") {
            r.output_dir = next();
        } else if (a == "-j" || a == "--jobs") {
            const std::string n = next();
            try {
                r.jobs = std::stoi(n);
            } catch (const std::exception&) {
                r.jobs = 0;
            }
            if (r.jobs < 1 || r.jobs > 256) {
                throw usage_failure{"-j takes a number from 1 to 256, not '" + n + "'"};
            }
        } else if (a.size() > 1 && a[0] == '-' && a != "-") {
            throw usage_failure{"unknown option " + a};
        } else {
            r.paths.push_back(a);
        }
    }
    if (r.output_dir.empty() ? r.paths.size() != 2 : r.paths.empty()) {
        throw usage_failure{r.output_dir.empty() ? "kpool run takes INPUT and OUTPUT (or INPUT... --output-dir DIR)"
                                                 : "kpool run --output-dir DIR needs at least one INPUT"};
    }
    return r;
}

// papermill's order: every -f, then every -y, then -p, then -r; a later value replaces an earlier
// one in its place.
params::parameters merge_parameters(const parsed_run& r) {
    params::parameters all = params::parameters::object();
    auto merge_yaml = [&](const std::string& text, const std::string& source) {
        auto values = params::parse_yaml_parameters(text, source);
        if (!values) {
            throw usage_failure{values.err().message};
        }
        for (const auto& [k, v] : values->items()) {
            all[k] = v;
        }
    };
    for (const std::string& file : r.yaml_files) {
        std::ifstream in(file);
        if (!in) {
            throw usage_failure{file + ": cannot read the parameters file"};
        }
        std::stringstream text;
        text << in.rdbuf();
        merge_yaml(text.str(), file);
    }
    for (const std::string& text : r.yaml_texts) {
        merge_yaml(text, "-y");
    }
    for (const auto& [name, value] : r.typed) {
        all[name] = params::resolve_cli_value(value);
    }
    for (const auto& [name, value] : r.raw) {
        all[name] = value;
    }
    return all;
}

int run_many(const std::vector<std::string>& endpoints, const curve_keys& keys, const parsed_run& r) {
    std::error_code ec;
    fs::create_directories(r.output_dir, ec);
    catch_stop_signals();
    std::atomic<std::size_t> next{0};
    std::atomic<int> failed{0};
    std::mutex print;
    auto worker = [&] {
        daemon_set daemons(endpoints, keys);
        // After Ctrl-C the running notebooks are interrupted and no new one starts.
        for (std::size_t i; stop_signal() == 0 && (i = next++) < r.paths.size();) {
            runner::run_options options = r.options;
            options.input = r.paths[i];
            options.output = (fs::path(r.output_dir) / fs::path(r.paths[i]).filename()).string();
            options.progress = false;
            const auto result = runner::run_notebook(daemons, options, stderr);
            if (result.exit_status != 0) {
                ++failed;
            }
            std::lock_guard lock(print);
            std::printf("%s -> %s: %s\n", options.input.c_str(), options.output.c_str(),
                        result.exit_status == 0 ? result.summary.c_str()
                                                : ("failed (exit " + std::to_string(result.exit_status) +
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
    if (stop_signal() != 0) {
        return exit_interrupted;
    }
    return failed == 0 ? 0 : 1;
}

} // namespace

int run_run(const std::string& endpoint, const curve_keys& keys, const std::vector<std::string>& args) {
    parsed_run r;
    try {
        r = parse(args);
        r.options.parameters = merge_parameters(r);
    } catch (const usage_failure& e) {
        std::fprintf(stderr, "kpool: %s\n\n%s", e.message.c_str(), run_usage);
        return 2;
    }
    auto endpoints = parse_endpoints(endpoint);
    if (!endpoints) {
        std::fprintf(stderr, "kpool: %s\n", endpoints.err().message.c_str());
        return 2;
    }
    if (!r.output_dir.empty()) {
        return run_many(*endpoints, keys, r);
    }
    r.options.input = r.paths[0];
    r.options.output = r.paths[1];
    r.options.progress = !r.no_progress && ::isatty(STDERR_FILENO) != 0;
    daemon_set daemons(*endpoints, keys);
    return runner::run_notebook(daemons, r.options, stderr).exit_status;
}

} // namespace kpool::client
