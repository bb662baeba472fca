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
#include <memory>
#include <set>
#include <variant>

extern char** environ;

namespace kpool::runner {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// How a run fails before its cells ran to an end: what run_notebook returns then.
struct failure {
    run_outcome outcome;
    std::string message;
};

// A step of a run: its value, or how the run fails.
template <class T>
using step = std::variant<T, failure>;

// The failure a step ended with, if it did.
template <class T>
const failure* failed(const step<T>& s) {
    return std::get_if<failure>(&s);
}

struct pool_choice {
    std::string pool;        // empty: no pool serves the kernelspec (or no kpoold answered)
    std::string kernel_name; // its kernelspec
    std::string language;
    std::string why_none; // when pool is empty: why, for the notice
};

step<pool_choice> choose_pool(client::daemon_set& daemons, const run_options& options,
                              const json& nb) {
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
            return failure{run_outcome::unreachable, unreachable};
        }
        return pool_choice{"", wanted_kernel, "", "no kpoold answered (" + unreachable + ")"};
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
                return pool_choice{p.name, p.kernelspec, p.language, ""};
            }
        }
    }
    if (!options.pool.empty()) {
        return failure{run_outcome::bad_input, "kpoold has no pool '" + options.pool +
                                                   "' nor one that serves kernelspec '" +
                                                   options.pool + "'; its pools: " + names};
    }
    if (wanted_kernel.empty()) {
        return failure{
            run_outcome::bad_input,
            "the notebook names no kernelspec: choose one with --pool or -k; kpoold's pools: " +
                (names.empty() ? std::string("none") : names)};
    }
    return pool_choice{"", wanted_kernel, "",
                       "no pool runs kernelspec '" + wanted_kernel + "' (kpoold's pools: " +
                           (names.empty() ? std::string("none") : names) + ")"};
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
    // The files --stdout-file and --stderr-file name, or the one that cannot be written.
    static step<std::unique_ptr<stream_files>> open(const run_options& options) {
        auto files = std::unique_ptr<stream_files>(new stream_files);
        for (const auto& [path, into] : {std::pair{options.stdout_file, &files->m_out},
                                         std::pair{options.stderr_file, &files->m_err}}) {
            if (path) {
                *into = std::fopen(path->c_str(), "w");
                if (*into == nullptr) {
                    return failure{run_outcome::bad_input,
                                   *path + ": cannot write: " + std::strerror(errno)};
                }
            }
        }
        return files;
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
    stream_files() = default;
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

// The input notebook read, parsed and loaded; OUTPUT checked writable before any work.
step<json> open_input(const run_options& options, const std::string& input_name) {
    for (const std::string& path : {options.input, options.output}) {
        if (is_remote_path(path)) {
            return failure{run_outcome::bad_input,
                           path + ": not supported yet: kpool run reads and writes local files; "
                                  "use a local path"};
        }
    }
    auto input_text = read_notebook_text(options.input);
    if (!input_text) {
        return failure{run_outcome::bad_input, input_text.err().message};
    }
    auto parsed = notebook::read_notebook(*input_text, input_name);
    if (!parsed) {
        return failure{run_outcome::bad_input, parsed.err().message};
    }
    json nb = std::move(parsed).value();
    load_notebook(nb, std::string("kpool ") + kpool::version);
    if (auto st = check_output_writable(options.output); !st) {
        return failure{run_outcome::bad_input, st.err().message};
    }
    return nb;
}

// The run's kernel, in `cwd` with this process's environment (as papermill's kernel, its child,
// sees it) plus the options': a warm one from the pool, else (no pool serves the kernelspec, or
// no kpoold answered the default endpoint) one started here, cold.
step<std::unique_ptr<jupyter::kernel_handle>> take_kernel(client::daemon_set& daemons,
                                                          const run_options& options,
                                                          const pool_choice& pool,
                                                          const fs::path& cwd, std::FILE* log) {
    std::map<std::string, std::string> env = caller_environment();
    for (const auto& [name, value] : options.env) {
        env[name] = value;
    }
    if (!pool.pool.empty()) {
        client::acquire_request request{.pool = pool.pool,
                                        .cwd = cwd.lexically_normal().string(),
                                        .env = std::move(env),
                                        .lease_s = std::nullopt,
                                        .wait = options.start_timeout,
                                        .memory_history = true}; // as papermill's kernels
        auto acquired = client::leased_kernel::acquire(daemons, request);
        if (auto* f = std::get_if<client::acquire_failure>(&acquired)) {
            return failure{f->why == client::acquire_failure::kind::unreachable
                               ? run_outcome::unreachable
                               : run_outcome::refused,
                           f->message};
        }
        return std::unique_ptr<jupyter::kernel_handle>(
            std::move(std::get<std::unique_ptr<client::leased_kernel>>(acquired)));
    }
    // A pipeline never breaks because a pool is missing: a kernel of our own, cold.
    std::fprintf(log, "kpool: notice: %s: starting kernelspec '%s' here for this run (cold)\n",
                 pool.why_none.c_str(), pool.kernel_name.c_str());
    auto started = local_kernel::start({.kernelspec = pool.kernel_name,
                                        .cwd = cwd.lexically_normal().string(),
                                        .env = std::move(env),
                                        .ready_timeout = options.start_timeout});
    if (!started) {
        return failure{started.err().code == errc::timeout ? run_outcome::refused
                                                           : run_outcome::bad_input,
                       pool.why_none + ", and starting it here failed: " + started.err().message};
    }
    return std::unique_ptr<jupyter::kernel_handle>(std::move(*started));
}

// OUTPUT that cannot be written while the cells run: thrown from inside the kernel driver's
// callbacks (save after a cell), the one failure that must unwind through them.
struct output_failure {
    failure why;
};

} // namespace

run_result run_notebook(client::daemon_set& daemons, const run_options& options, std::FILE* log) {
    auto say = [&](int level, const std::string& line) {
        if (level >= options.log_level) {
            std::fprintf(log, "%s\n", line.c_str());
            std::fflush(log);
        }
    };
    auto fail = [&](const failure& f) -> run_result {
        if (options.log_level <= 40) {
            std::fprintf(log, "kpool: %s\n", f.message.c_str());
        }
        return {f.outcome, f.message};
    };
    say(20, "Input Notebook:  " + options.input);
    say(20, "Output Notebook: " + options.output);
    const std::string input_name = options.input == "-" ? "<stdin>" : options.input;
    auto opened = open_input(options, input_name);
    if (const failure* f = failed(opened)) {
        return fail(*f);
    }
    json nb = std::move(std::get<json>(opened));
    // --prepare-only needs no kernel and so no daemon: the notebook says what it needs.
    auto chosen =
        options.prepare_only
            ? step<pool_choice>(pool_choice{"", nb_kernel_name(nb, options.kernel), "", ""})
            : choose_pool(daemons, options, nb);
    if (const failure* f = failed(chosen)) {
        return fail(*f);
    }
    const pool_choice& pool = std::get<pool_choice>(chosen);
    const std::string language = nb_language(nb, options.language, pool.language);

    auto warnings = prepare_notebook(nb, {.kernel_name = pool.kernel_name,
                                          .language = language,
                                          .parameters = options.parameters,
                                          .input_path = options.input,
                                          .output_path = options.output,
                                          .environment = json(options.env),
                                          .report_mode = options.report_mode});
    if (!warnings) {
        return fail({run_outcome::bad_input, warnings.err().message});
    }
    for (const std::string& w : *warnings) {
        say(30, "kpool: warning: " + input_name + ": " + w);
    }
    const std::string target = output_target(options.output);
    auto write_output = [&]() -> status {
        if (options.output == "-") {
            return ok_status();
        }
        return write_atomically(target, notebook::write_notebook(nb));
    };
    auto finish = [&](run_result r) {
        if (options.output == "-") {
            const std::string text = notebook::write_notebook(nb);
            std::fwrite(text.data(), 1, text.size(), stdout);
            std::fflush(stdout);
        } else if (auto st = write_output(); !st) {
            return fail({run_outcome::bad_input, st.err().message});
        }
        return r;
    };
    if (options.prepare_only) {
        return finish({run_outcome::ok, "prepared"});
    }

    auto files = stream_files::open(options);
    if (const failure* f = failed(files)) {
        return fail(*f);
    }
    const fs::path cwd = options.cwd ? fs::absolute(*options.cwd) : fs::current_path();
    if (options.cwd) {
        say(20, "Working directory: " + *options.cwd);
    }
    auto taken = take_kernel(daemons, options, pool, cwd, log);
    if (const failure* f = failed(taken)) {
        return fail(*f);
    }
    jupyter::kernel_handle& kernel = *std::get<std::unique_ptr<jupyter::kernel_handle>>(taken);
    auto save = [&] {
        if (options.save_after_each_cell) {
            if (auto st = write_output(); !st) {
                throw output_failure{{run_outcome::bad_input, st.err().message}};
            }
        }
    };
    say(20, "Executing notebook with kernel: " + pool.kernel_name);
    const auto start = wall_clock::now();
    notebook_start(nb, start);
    stop_reason stop;
    cell_executor cells(nb, options, log, kernel, *std::get<std::unique_ptr<stream_files>>(files));
    try {
        save();
        stop = cells.run_all(save);
    } catch (const output_failure& f) {
        return fail(f.why);
    }
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
