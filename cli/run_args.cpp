// kpool run's command line: reading it, and merging the parameters as papermill does.
#include "cli/run_args.hpp"

#include "cli/duration.hpp"
#include "cli/exit_status.hpp"
#include "cli/remote_options.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace kpool::cli {
namespace {

// papermill's seconds, or a duration with its unit (cli/duration.hpp).
std::chrono::milliseconds seconds(const std::string& text, const std::string& what) {
    if (const auto d = parse_duration(text, bare_unit::seconds)) {
        return d->value;
    }
    throw usage_failure{duration_usage(what, text, bare_unit::seconds)};
}

// A whole number written as one (digits only), or nothing.
std::optional<std::size_t> whole_number(const std::string& text) {
    if (text.empty() || text.size() > 9 ||
        text.find_first_not_of("0123456789") != std::string::npos) {
        return std::nullopt;
    }
    return static_cast<std::size_t>(std::stoul(text));
}

// papermill's engines that run cells the way kpool run does (nbclient is its default).
bool is_default_engine(const std::string& name) { return name.empty() || name == "nbclient"; }

// Is stdin a pipe (papermill's INPUT_PIPED: a notebook comes on stdin)?
bool stdin_is_pipe() {
    struct stat st {};
    return ::fstat(STDIN_FILENO, &st) == 0 && S_ISFIFO(st.st_mode);
}

} // namespace

int exit_status_of(runner::run_outcome outcome) {
    switch (outcome) {
    case runner::run_outcome::ok: return exit_status::ok;
    case runner::run_outcome::cell_failed:
    case runner::run_outcome::refused: return exit_status::failed;
    case runner::run_outcome::bad_input: return exit_status::usage;
    case runner::run_outcome::unreachable: return exit_status::unreachable;
    case runner::run_outcome::interrupted: return exit_status::interrupted;
    case runner::run_outcome::kernel_died: return exit_status::kernel_died;
    }
    return exit_status::failed;
}

const std::map<std::string, int>& log_levels() {
    static const std::map<std::string, int> levels = {{"NOTSET", 0}, {"DEBUG", 10},
                                                      {"INFO", 20},  {"WARNING", 30},
                                                      {"ERROR", 40}, {"CRITICAL", 50}};
    return levels;
}

parsed_run parse_run_args(const std::vector<std::string>& args) {
    parsed_run r;
    // Through a kpool serve, how long a notebook that got no kernel is sent again: the start
    // timeout's (--patience says the same).
    r.remote.patience_s = std::chrono::duration<double>(r.options.start_timeout).count();
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
        } else if (a == "-l" || a == "--language") {
            r.options.language = next();
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
        } else if (a == "-b" || a == "--parameters_base64") {
            r.base64_texts.push_back(next());
        } else if (a == "--inject-input-path") {
            r.inject_input = true;
        } else if (a == "--inject-output-path") {
            r.inject_output = true;
        } else if (a == "--inject-paths") {
            r.inject_input = r.inject_output = true;
        } else if (a == "--engine") {
            const std::string engine = next();
            if (!is_default_engine(engine)) {
                throw usage_failure{"--engine " + engine +
                                    ": kpool run executes cells as papermill's "
                                    "default engine (nbclient) does; no other engine is supported"};
            }
        } else if (a == "--request-save-on-cell-execute") {
            r.options.save_after_each_cell = true;
        } else if (a == "--no-request-save-on-cell-execute") {
            r.options.save_after_each_cell = false;
        } else if (a == "--autosave-cell-every") {
            const std::string n = next();
            try {
                std::size_t used = 0;
                const long v = std::stol(n, &used);
                if (used != n.size() || v < 0) {
                    throw std::invalid_argument(n);
                }
                r.options.autosave_every = std::chrono::seconds(v);
            } catch (const std::exception&) {
                throw usage_failure{"--autosave-cell-every takes whole seconds (0: never), not '" +
                                    n + "'"};
            }
        } else if (a == "--cells-ahead") {
            const std::string n = next();
            const auto v = whole_number(n);
            if (!v || *v < 1 || *v > 64) {
                throw usage_failure{"--cells-ahead takes a whole number from 1 to 64, not '" + n +
                                    "'"};
            }
            r.options.cells_ahead = *v;
        } else if (a == "--prepare-only") {
            r.options.prepare_only = true;
        } else if (a == "--prepare-execute") {
            r.options.prepare_only = false;
        } else if (a == "--log-output") {
            r.options.log_output = true;
        } else if (a == "--no-log-output") {
            r.options.log_output = false;
        } else if (a == "--progress-bar") {
            r.progress_bar = true;
        } else if (a == "--no-progress-bar" || a == "--no-progress") {
            r.progress_bar = false;
        } else if (a == "--stdout-file") {
            r.options.stdout_file = next();
        } else if (a == "--stderr-file") {
            r.options.stderr_file = next();
        } else if (a == "--log-level") {
            r.log_level = next();
            if (log_levels().count(r.log_level) == 0) {
                throw usage_failure{
                    "--log-level takes NOTSET, DEBUG, INFO, WARNING, ERROR or CRITICAL, not '" +
                    r.log_level + "'"};
            }
        } else if (a == "--start-timeout" || a == "--start_timeout") {
            r.options.start_timeout = seconds(next(), a);
            r.remote.patience_s = std::chrono::duration<double>(r.options.start_timeout).count();
        } else if (a == "--execution-timeout") {
            r.options.execution_timeout = seconds(next(), a);
        } else if (a == "--report-mode") {
            r.options.report_mode = true;
        } else if (a == "--no-report-mode") {
            r.options.report_mode = false;
        } else if (a == "--help-notebook") {
            r.help_notebook = true;
        } else if (a == "--allow-errors") {
            r.options.allow_errors = true;
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
        } else if (take_remote_option(args, i, r.remote, r.token_file)) {
            continue;
        } else if (a.size() > 1 && a[0] == '-' && a != "-") {
            throw usage_failure{"unknown option " + a};
        } else {
            r.paths.push_back(a);
        }
    }
    if (!r.output_dir.empty()) {
        if (r.paths.empty()) {
            throw usage_failure{"kpool run --output-dir DIR needs at least one INPUT"};
        }
        return r;
    }
    if (r.paths.size() > 2) {
        throw usage_failure{"kpool run takes INPUT and OUTPUT (or INPUT... --output-dir DIR)"};
    }
    // papermill's rules: a notebook piped in, or stdout not a terminal, makes the paths optional
    // ("-"); with a notebook piped in, a single path is OUTPUT.
    const bool input_piped = stdin_is_pipe();
    const bool output_piped = ::isatty(STDOUT_FILENO) == 0;
    if (!r.help_notebook && !(input_piped || output_piped) && r.paths.size() < 2) {
        throw usage_failure{r.paths.empty()
                                ? "kpool run takes INPUT and OUTPUT (or INPUT... --output-dir DIR)"
                                : "missing OUTPUT (or - for stdout)"};
    }
    if (input_piped && r.paths.size() == 1 && !r.help_notebook) {
        r.paths = {"-", r.paths[0]};
    }
    while (r.paths.size() < 2) {
        r.paths.push_back("-");
    }
    return r;
}

// papermill's order: the injected paths, every -b, every -f, every -y, then -p, then -r; a later
// value replaces an earlier

// one in its place.

params::parameters merge_parameters(const parsed_run& r, const std::string& input,
                                    const std::string& output) {
    params::parameters all = params::parameters::object();
    if (r.inject_input) {
        all["PAPERMILL_INPUT_PATH"] = input;
    }
    if (r.inject_output) {
        all["PAPERMILL_OUTPUT_PATH"] = output;
    }
    auto merge_yaml = [&](const std::string& text, const std::string& source) {
        auto values = params::parse_yaml_parameters(text, source);
        if (!values) {
            throw usage_failure{values.err().message};
        }
        for (const auto& [k, v] : values->items()) {
            all[k] = v;
        }
    };
    for (const std::string& text : r.base64_texts) {
        auto decoded = params::base64_decode(text);
        if (!decoded) {
            throw usage_failure{"-b: " + decoded.err().message};
        }
        merge_yaml(*decoded, "-b");
    }
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

} // namespace kpool::cli
