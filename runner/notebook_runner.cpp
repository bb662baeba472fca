// run_notebook: parameterize, execute cell by cell, save after each, report like papermill.
#include "runner/notebook_runner.hpp"

#include "client/leased_kernel.hpp"
#include "jupyter/execution_tracker.hpp"
#include "kpool/version.hpp"
#include "notebook/nbformat.hpp"
#include "protocol/control_replies.hpp"
#include "runner/cell_pipeline.hpp"
#include "runner/local_kernel.hpp"
#include "runner/notebook_engine.hpp"
#include "runner/notebook_files.hpp"
#include "runner/notebook_prep.hpp"
#include "runner/papermill.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <functional>
#include <set>

extern char** environ;

namespace kpool::runner {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct failure {
    run_outcome outcome;
    std::string message;
};

struct pool_choice {
    std::string pool;        // empty: no pool serves the kernelspec (or no kpoold answered)
    std::string kernel_name; // its kernelspec
    std::string language;
    std::string why_none; // when pool is empty: why, for the notice
};

pool_choice choose_pool(client::daemon_set& daemons, const run_options& options, const json& nb) {
    const json& spec = nb["metadata"].value("kernelspec", json::object());
    const std::string wanted_kernel = !options.kernel.empty() ? options.kernel
                                      : spec.is_object()      ? spec.value("name", "")
                                                              : "";
    // The first daemon that answers: every daemon of a set serves the same pools.
    std::optional<json> status;
    std::string unreachable;
    for (auto& answer : daemons.statuses(5000ms)) {
        if (answer.reply) {
            status = std::move(*answer.reply);
            break;
        }
        unreachable = answer.reply.err().message;
    }
    if (!status) {
        if (!options.pool.empty() || wanted_kernel.empty() || options.daemon_named) {
            throw failure{run_outcome::unreachable, unreachable};
        }
        return {"", wanted_kernel, "", "no kpoold answered (" + unreachable + ")"};
    }
    auto listed = protocol::read_status_pools(*status);
    std::string names;
    std::vector<protocol::pool_summary> serving;
    for (protocol::pool_summary& p : listed ? *listed : std::vector<protocol::pool_summary>{}) {
        if (!p.removed) {
            names += (names.empty() ? "" : ", ") + p.name + " (kernelspec " + p.kernelspec + ")";
            serving.push_back(std::move(p));
        }
    }
    // --pool, -k and the notebook's kernelspec name a kernel by the one rule of every client.
    const std::string& wanted = !options.pool.empty() ? options.pool : wanted_kernel;
    if (const auto chosen = protocol::resolve_pool_name(wanted, serving)) {
        for (const protocol::pool_summary& p : serving) {
            if (p.name == *chosen) {
                return {p.name, p.kernelspec, p.language, ""};
            }
        }
    }
    if (!options.pool.empty()) {
        throw failure{run_outcome::bad_input, "kpoold has no pool '" + options.pool +
                                                  "' nor one that serves kernelspec '" +
                                                  options.pool + "'; its pools: " + names};
    }
    if (wanted_kernel.empty()) {
        throw failure{
            run_outcome::bad_input,
            "the notebook names no kernelspec: choose one with --pool or -k; kpoold's pools: " +
                (names.empty() ? std::string("none") : names)};
    }
    return {"", wanted_kernel, "",
            "no pool runs kernelspec '" + wanted_kernel +
                "' (kpoold's pools: " + (names.empty() ? std::string("none") : names) + ")"};
}

class progress_line {
public:
    progress_line(std::FILE* log, bool on, std::size_t total)
        : m_log(log), m_on(on), m_total(total) {}
    void show(std::size_t done) {
        if (m_on) {
            std::fprintf(
                m_log, "\rkpool run: %zu/%zu cells, %.1f s", done, m_total,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - m_start).count());
            std::fflush(m_log);
        }
    }
    void end() {
        if (m_on) {
            std::fputc('\n', m_log);
        }
    }

private:
    std::FILE* m_log;
    bool m_on;
    std::size_t m_total;
    std::chrono::steady_clock::time_point m_start = std::chrono::steady_clock::now();
};

// Where the cells' stream outputs go besides the notebook: --stdout-file and --stderr-file,
// opened for the run (truncated, as papermill's click.File(mode='w') does).
class stream_files {
public:
    explicit stream_files(const run_options& options) {
        if (options.stdout_file) {
            m_out = open(*options.stdout_file);
        }
        if (options.stderr_file) {
            m_err = open(*options.stderr_file);
        }
    }
    ~stream_files() {
        for (std::FILE* f : {m_out, m_err}) {
            if (f != nullptr) {
                std::fclose(f);
            }
        }
    }
    stream_files(const stream_files&) = delete;
    stream_files& operator=(const stream_files&) = delete;

    void write(const json& output) {
        std::FILE* to = output.value("name", "") == "stderr" ? m_err : m_out;
        if (to != nullptr) {
            const std::string text = output.value("text", "");
            std::fwrite(text.data(), 1, text.size(), to);
            std::fflush(to);
        }
    }

private:
    static std::FILE* open(const std::string& path) {
        std::FILE* f = std::fopen(path.c_str(), "w");
        if (f == nullptr) {
            throw failure{run_outcome::bad_input, path + ": cannot write: " + std::strerror(errno)};
        }
        return f;
    }
    std::FILE* m_out = nullptr;
    std::FILE* m_err = nullptr;
};

// The blocking driver of notebook_engine: each cell through jupyter::execute, OUTPUT saved
// after every cell (and during long ones), papermill's log lines and the stream files.
class cell_executor {
public:
    cell_executor(json& nb, const run_options& options, std::FILE* log,
                  jupyter::kernel_handle& kernel, stream_files& files)
        : m_nb(nb), m_options(options), m_log(log), m_kernel(kernel), m_files(files),
          m_engine(nb, {.allow_errors = options.allow_errors,
                        .execution_timeout = options.execution_timeout}) {}

    // Runs every cell; what stopped it, if anything. `save` is called after every cell (and
    // during long cells, every autosave_every).
    stop_reason run_all(const std::function<void()>& save) {
        m_save = save;
        progress_line progress(m_log, m_options.progress, m_nb["cells"].size());
        jupyter::kernel_client& client = m_kernel.client();
        cell_pipeline cells(
            m_engine,
            [&client](const jupyter::execute_request& r) {
                return client.send(jupyter::channel::shell, "execute_request",
                                   jupyter::execute_request_content(r));
            },
            m_options.cells_ahead,
            {.kernel_info = [this]() -> const json& { return m_kernel.kernel_info(); },
             .began =
                 [&](std::size_t i) {
                     if (m_options.log_output) { // papermill's banners: f'Executing Cell {n:-<40}'
                         std::fprintf(m_log, "Executing Cell %s\n", padded(i + 1, 40).c_str());
                     }
                     save_now();
                 },
             .ended =
                 [&](std::size_t i) {
                     save_now();
                     if (m_options.log_output) {
                         std::fprintf(m_log, "Ending Cell %s\n", padded(i + 1, 43).c_str());
                         std::fflush(m_log);
                     }
                     progress.show(i + 1);
                 },
             .iopub = [&](const protocol::wire_message&,
                          const json& output) { on_output(output); }});
        jupyter::drive(client, cells, m_kernel.hooks(m_options.cancelled));
        progress.end();
        return m_engine.stop();
    }

    notebook_engine& engine() { return m_engine; }

private:
    void on_output(const json& out) {
        autosave();
        if (out.is_null()) {
            return;
        }
        if (out.value("output_type", "") == "stream") {
            m_files.write(out);
            if (m_options.log_output) {
                const std::string text = out.value("text", "");
                std::fwrite(text.data(), 1, text.size(), m_log);
                std::fflush(m_log);
            }
        } else if (m_options.log_output) {
            const json& data = out.value("data", json::object());
            if (auto plain = data.find("text/plain"); plain != data.end() && plain->is_string()) {
                std::fprintf(m_log, "%s\n", plain->get<std::string>().c_str());
                std::fflush(m_log);
            }
        }
    }

    // A number left-aligned and padded with '-' to `width`, as Python's f'{n:-<width}'.
    static std::string padded(std::size_t n, std::size_t width) {
        std::string s = std::to_string(n);
        return s.size() < width ? s + std::string(width - s.size(), '-') : s;
    }

    void save_now() {
        m_save();
        m_last_save = std::chrono::steady_clock::now();
    }

    // papermill's autosave_cell: on a message, save if the last save is autosave_every old.
    void autosave() {
        if (m_options.autosave_every.count() > 0 &&
            std::chrono::steady_clock::now() - m_last_save >= m_options.autosave_every) {
            save_now();
        }
    }

    json& m_nb;
    const run_options& m_options;
    std::FILE* m_log;
    jupyter::kernel_handle& m_kernel;
    stream_files& m_files;
    notebook_engine m_engine;
    std::function<void()> m_save;
    std::chrono::steady_clock::time_point m_last_save = std::chrono::steady_clock::now();
};

} // namespace

run_result run_notebook(client::daemon_set& daemons, const run_options& options, std::FILE* log) {
    auto say = [&](int level, const std::string& line) {
        if (level >= options.log_level) {
            std::fprintf(log, "%s\n", line.c_str());
            std::fflush(log);
        }
    };
    try {
        for (const std::string& path : {options.input, options.output}) {
            if (is_remote_path(path)) {
                throw failure{run_outcome::bad_input,
                              path + ": not supported yet: kpool run reads and writes local files; "
                                     "use a local path"};
            }
        }
        say(20, "Input Notebook:  " + options.input);
        say(20, "Output Notebook: " + options.output);
        const std::string input_name = options.input == "-" ? "<stdin>" : options.input;
        auto input_text = read_notebook_text(options.input);
        if (!input_text) {
            throw failure{run_outcome::bad_input, input_text.err().message};
        }
        auto parsed = notebook::read_notebook(*input_text, input_name);
        if (!parsed) {
            throw failure{run_outcome::bad_input, parsed.err().message};
        }
        json nb = std::move(parsed).value();
        load_notebook(nb, std::string("kpool ") + kpool::version);
        if (auto st = check_output_writable(options.output); !st) {
            throw failure{run_outcome::bad_input, st.err().message};
        }
        // --prepare-only needs no kernel and so no daemon: the notebook says what it needs.
        const pool_choice pool = options.prepare_only
                                     ? pool_choice{"", nb_kernel_name(nb, options.kernel), "", ""}
                                     : choose_pool(daemons, options, nb);
        const std::string language = nb_language(nb, options.language, pool.language);

        auto warnings = prepare_notebook(nb, {.kernel_name = pool.kernel_name,
                                              .language = language,
                                              .parameters = options.parameters,
                                              .input_path = options.input,
                                              .output_path = options.output,
                                              .environment = json(options.env),
                                              .report_mode = options.report_mode});
        if (!warnings) {
            throw failure{run_outcome::bad_input, warnings.err().message};
        }
        for (const std::string& w : *warnings) {
            say(30, "kpool: warning: " + input_name + ": " + w);
        }
        const std::string target = output_target(options.output);
        auto write_output = [&] {
            if (options.output != "-") {
                if (auto st = write_atomically(target, notebook::write_notebook(nb)); !st) {
                    throw failure{run_outcome::bad_input, st.err().message};
                }
            }
        };
        auto save = [&] {
            if (options.save_after_each_cell) {
                write_output();
            }
        };
        auto finish = [&](run_result r) {
            if (options.output == "-") {
                const std::string text = notebook::write_notebook(nb);
                std::fwrite(text.data(), 1, text.size(), stdout);
                std::fflush(stdout);
            } else {
                write_output();
            }
            return r;
        };
        if (options.prepare_only) {
            return finish({run_outcome::ok, "prepared"});
        }

        stream_files files(options);
        // The kernel sees this process's environment and working directory, as papermill's
        // kernel (its child) does.
        std::map<std::string, std::string> env = caller_environment();
        for (const auto& [name, value] : options.env) {
            env[name] = value;
        }
        const fs::path cwd = options.cwd ? fs::absolute(*options.cwd) : fs::current_path();
        if (options.cwd) {
            say(20, "Working directory: " + *options.cwd);
        }
        std::unique_ptr<jupyter::kernel_handle> kernel_owner;
        if (!pool.pool.empty()) {
            client::acquire_request request{.pool = pool.pool,
                                            .cwd = cwd.lexically_normal().string(),
                                            .env = std::move(env),
                                            .lease_s = std::nullopt,
                                            .wait = options.start_timeout,
                                            .memory_history = true}; // as papermill's kernels
            auto acquired = client::leased_kernel::acquire(daemons, request);
            if (auto* f = std::get_if<client::acquire_failure>(&acquired)) {
                throw failure{f->why == client::acquire_failure::kind::unreachable
                                  ? run_outcome::unreachable
                                  : run_outcome::refused,
                              f->message};
            }
            kernel_owner = std::move(std::get<std::unique_ptr<client::leased_kernel>>(acquired));
        } else {
            // A pipeline never breaks because a pool is missing: a kernel of our own, cold.
            std::fprintf(log,
                         "kpool: notice: %s: starting kernelspec '%s' here for this run (cold)\n",
                         pool.why_none.c_str(), pool.kernel_name.c_str());
            auto started = local_kernel::start({.kernelspec = pool.kernel_name,
                                                .cwd = cwd.lexically_normal().string(),
                                                .env = std::move(env),
                                                .ready_timeout = options.start_timeout});
            if (!started) {
                throw failure{started.err().code == errc::timeout ? run_outcome::refused
                                                                  : run_outcome::bad_input,
                              pool.why_none +
                                  ", and starting it here failed: " + started.err().message};
            }
            kernel_owner = std::move(*started);
        }
        jupyter::kernel_handle& kernel = *kernel_owner;
        say(20, "Executing notebook with kernel: " + pool.kernel_name);
        const auto start = wall_clock::now();
        notebook_start(nb, start);
        save();
        cell_executor cells(nb, options, log, kernel, files);
        stop_reason stop = cells.run_all(save);
        if (stop.outcome == run_outcome::kernel_died && !kernel.death_reason().empty()) {
            stop.message += ": " + kernel.death_reason(); // kpoold knows why: "out of memory (...)"
        }
        notebook_engine& engine = cells.engine();
        // As papermill: the kernel's language_info once the cells have run (an error cell
        // included); a run cut off by a timeout, a dead kernel or Ctrl-C keeps the input's.
        if (auto info = kernel.kernel_info().find("language_info");
            engine.ran_through() && info != kernel.kernel_info().end()) {
            nb["metadata"]["language_info"] = *info;
        }
        if (!stop.message.empty()) {
            say(40, "kpool: " + input_name + ": " + stop.message);
        } else if (stop.outcome == run_outcome::cell_failed && engine.failed_cell() >= 0 &&
                   options.log_level <= 40) {
            const auto index = static_cast<std::size_t>(engine.failed_cell());
            report_error(log, input_name, nb["cells"][index], index);
        }
        engine.finish(start, wall_clock::now());
        const double seconds = std::chrono::duration<double>(wall_clock::now() - start).count();
        return finish({stop.outcome, stop.outcome == run_outcome::ok
                                         ? "ok (" + std::to_string(seconds).substr(0, 5) + " s)"
                                     : stop.message.empty() ? "failed"
                                                            : stop.message});
    } catch (const failure& f) {
        if (options.log_level <= 40) {
            std::fprintf(log, "kpool: %s\n", f.message.c_str());
        }
        return {f.outcome, f.message};
    }
}

// The first error output of the failing cell, reported the way papermill's exception prints.
void report_error(std::FILE* log, const std::string& input, const json& cell, std::size_t index) {
    for (const json& out : cell.value("outputs", json::array())) {
        if (out.value("output_type", "") != "error") {
            continue;
        }
        const std::string tb = protocol::traceback_text(out.value("traceback", json()));
        const json& count = cell.value("execution_count", json());
        std::fprintf(log, "kpool: %s: cell %zu (In [%s]) raised %s: %s\n%s", input.c_str(), index,
                     count.is_null() ? "None" : count.dump().c_str(),
                     out.value("ename", "").c_str(), out.value("evalue", "").c_str(), tb.c_str());
        return;
    }
}

std::map<std::string, std::string> caller_environment() {
    static const std::set<std::string> left_out = {"JPY_PARENT_PID", "KPOOL_INSTANCE", "PWD",
                                                   "OLDPWD",         "SHLVL",          "_"};
    std::map<std::string, std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
        const std::string_view entry(*e);
        const auto eq = entry.find('=');
        if (eq == std::string_view::npos || eq == 0) {
            continue;
        }
        std::string name(entry.substr(0, eq));
        if (left_out.count(name) == 0) {
            env.emplace(std::move(name), std::string(entry.substr(eq + 1)));
        }
    }
    return env;
}

} // namespace kpool::runner
