// kpool run through a kpool serve: jobs made from the command line, fed, answered as kpool run.
#include "cli/remote_run.hpp"

#include "cli/exit_status.hpp"
#include "notebook/nbformat.hpp"
#include "runner/notebook_files.hpp"
#include "runner/papermill.hpp"

#include <chrono>
#include <cstdio>
#include <filesystem>

namespace kpool::cli {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

// kpool run's options that need the kernel's messages as they come, which kpool serve does not
// pass on (it answers with the notebook once it has run), or what it does not do.
void refuse_local_only(const parsed_run& r) {
    const char* streamed = "kpool serve answers with the notebook once it has run";
    auto refuse = [](const std::string& option, const std::string& why) {
        throw usage_failure{option + " is not available with --url: " + why};
    };
    if (r.options.log_output) {
        refuse("--log-output", streamed);
    }
    if (r.options.stdout_file || r.options.stderr_file) {
        refuse(r.options.stdout_file ? "--stdout-file" : "--stderr-file", streamed);
    }
    if (!r.options.language.empty()) {
        refuse("-l/--language", "kpool serve writes the parameters in the notebook's language");
    }
    if (r.options.allow_errors) {
        refuse("--allow-errors", "kpool serve stops at a cell that raises, as papermill does");
    }
}

result<remote::serve_job> job_for(const parsed_run& r, const std::string& input,
                                  const std::string& output, const params::parameters& parameters,
                                  std::size_t line) {
    auto text = runner::read_notebook_text(input);
    if (!text) {
        return text.err();
    }
    const std::string name = input == "-" ? "<stdin>" : input;
    if (auto parsed = notebook::read_notebook(*text, name); !parsed) {
        return parsed.err(); // said here, as kpool run says it, before anything is sent
    }
    remote::notebook_job spec;
    spec.id = input;
    spec.line = line;
    spec.input = input;
    spec.output = output;
    spec.notebook_text = std::move(*text);
    spec.parameters = parameters;
    spec.kernel = r.options.pool.empty() ? r.options.kernel : r.options.pool;
    if (r.options.execution_timeout) {
        spec.timeout_s = std::chrono::duration<double>(*r.options.execution_timeout).count();
    }
    spec.cwd = r.options.cwd.value_or("");
    spec.env = r.options.env;
    spec.report_mode = r.options.report_mode;
    return remote::make_notebook_job(spec);
}

// How an answer ends the run, as kpool run's own outcomes (hence exit statuses) say it.
runner::run_result outcome_of(const remote::job_answer& a) {
    const auto& status = a.line["status"];
    const nlohmann::ordered_json error =
        a.line.contains("error") ? a.line["error"] : nlohmann::ordered_json();
    const std::string message = error.is_object() ? error.value("message", "") : "";
    if (status.is_null()) {
        const std::string code = error.value("error", "");
        // No kernel within the patience (--start-timeout) is kpool run's "refused"; no server at
        // all, its "unreachable".
        if (code == "gave_up" && !error.value("last_status", nlohmann::ordered_json()).is_null()) {
            return {runner::run_outcome::refused, message};
        }
        return {code == "lost" ? runner::run_outcome::refused : runner::run_outcome::unreachable,
                message};
    }
    switch (status.get<int>()) {
    case 200:
        if (a.line.value("outcome", "") == "error") {
            return {runner::run_outcome::cell_failed, "failed"}; // kpool run's word for it
        }
        return {runner::run_outcome::ok,
                "ok (" + std::to_string(a.line.value("ms", 0.0) / 1000).substr(0, 5) + " s)"};
    case 400:
    case 404:
    case 413:
    case 415:
    case 431: return {runner::run_outcome::bad_input, message};
    case 401:
    case 403:
        return {runner::run_outcome::unreachable, "kpool serve refused this client: " + message};
    case 502: return {runner::run_outcome::kernel_died, message};
    case 504: return {runner::run_outcome::cell_failed, message};
    default: return {runner::run_outcome::refused, message};
    }
}

// The index the failed cell had before papermill's marker cells went in (what kpool run says).
void report_failed_cell(const json& nb, const std::string& input) {
    std::size_t index = 0;
    for (const json& cell : nb.value("cells", json::array())) {
        const json& tags = cell.value("metadata", json::object()).value("tags", json::array());
        if (std::find(tags.begin(), tags.end(), runner::error_marker_tag) != tags.end()) {
            continue;
        }
        for (const json& out : cell.value("outputs", json::array())) {
            if (out.value("output_type", "") == "error") {
                return runner::report_error(stderr, input, cell, index);
            }
        }
        ++index;
    }
}

// kpool serve's Kpool-Warnings (papermill's "Passed unknown parameter: x"), as kpool run says them.
void say_warnings(const remote::job_answer& a, const std::string& input, int level) {
    if (level > 30 || !a.line.contains("warnings")) {
        return;
    }
    for (const auto& w : a.line["warnings"]) {
        std::fprintf(stderr, "kpool: warning: %s: %s\n", input.c_str(),
                     w.get<std::string>().c_str());
    }
}

int run_one(const parsed_run& r) {
    const runner::run_options& o = r.options;
    const int level =
        o.output == "-" && o.log_level == 20 ? 40 : o.log_level; // papermill's, for stdout
    auto say = [level](int at, const std::string& line) {
        if (at >= level) {
            std::fprintf(stderr, "%s\n", line.c_str());
        }
    };
    say(20, "Input Notebook:  " + o.input);
    say(20, "Output Notebook: " + o.output);
    auto job = job_for(r, o.input, o.output, o.parameters, 1);
    if (!job) {
        say(40, "kpool: " + job.err().message);
        return exit_status::usage;
    }
    remote::feed_settings settings = r.remote;
    settings.policy.max_in_flight = 1;
    say(20, "Executing notebook through " + settings.client.base_url);
    std::optional<remote::job_answer> answer;
    std::vector<remote::serve_job> jobs;
    jobs.push_back(std::move(*job));
    remote::feed(std::move(jobs), settings, [&](const remote::job_answer& a) { answer = a; });
    const std::string name = o.input == "-" ? "<stdin>" : o.input;
    say_warnings(*answer, name, level);
    const runner::run_result result = outcome_of(*answer);
    if (result.outcome == runner::run_outcome::cell_failed && answer->line["status"] == 200) {
        if (level <= 40) {
            report_failed_cell(answer->notebook, name);
        }
    } else if (result.outcome != runner::run_outcome::ok) {
        say(40, "kpool: " + name + ": " + result.summary);
    }
    return exit_status_of(result.outcome);
}

int run_many_remote(const parsed_run& r) {
    std::error_code ec;
    fs::create_directories(r.output_dir, ec);
    remote::feed_settings settings = r.remote;
    settings.policy.max_in_flight = static_cast<std::size_t>(r.jobs);
    std::vector<remote::serve_job> jobs;
    std::size_t failed = 0;
    for (std::size_t i = 0; i < r.paths.size(); ++i) {
        const std::string output =
            (fs::path(r.output_dir) / fs::path(r.paths[i]).filename()).string();
        auto job = job_for(r, r.paths[i], output, merge_parameters(r, r.paths[i], output), i + 1);
        if (!job) {
            std::printf("%s -> %s: failed (exit 2: %s)\n", r.paths[i].c_str(), output.c_str(),
                        job.err().message.c_str());
            ++failed;
            continue;
        }
        jobs.push_back(std::move(*job));
    }
    const auto started = std::chrono::steady_clock::now();
    const std::size_t total = r.paths.size();
    remote::feed(std::move(jobs), settings, [&](const remote::job_answer& a) {
        const runner::run_result result = outcome_of(a);
        const int status = exit_status_of(result.outcome);
        // On stderr, as kpool run's (whose many-notebook runs say warnings and errors alone).
        say_warnings(a, a.line["id"].get<std::string>(), std::max(r.options.log_level, 30));
        if (result.outcome == runner::run_outcome::cell_failed && a.line["status"] == 200) {
            report_failed_cell(a.notebook, a.line["id"].get<std::string>());
        }
        failed += status == exit_status::ok ? 0 : 1;
        const std::string input = a.line["id"].get<std::string>();
        const std::string output = (fs::path(r.output_dir) / fs::path(input).filename()).string();
        std::printf("%s -> %s: %s\n", input.c_str(), output.c_str(),
                    status == exit_status::ok
                        ? result.summary.c_str()
                        : ("failed (exit " + std::to_string(status) +
                           (result.summary.empty() ? "" : ": " + result.summary) + ")")
                              .c_str());
        std::fflush(stdout);
    });
    std::printf("%zu notebooks: %zu ok, %zu failed in %.1f s\n", total, total - failed, failed,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count());
    return failed == 0 ? exit_status::ok : exit_status::failed;
}

} // namespace

int run_remote(const parsed_run& r) {
    refuse_local_only(r);
    return r.output_dir.empty() ? run_one(r) : run_many_remote(r);
}

} // namespace kpool::cli
