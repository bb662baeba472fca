// run_notebook: parameterize, execute cell by cell, save after each, report like papermill.
#include "runner/notebook_runner.hpp"

#include "client/leased_kernel.hpp"
#include "kpool/version.hpp"
#include "notebook/nbformat.hpp"
#include "notebook/outputs.hpp"
#include "params/translators.hpp"
#include "runner/papermill.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <set>
#include <sstream>

namespace kpool::runner {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

struct failure {
    int exit_status;
    std::string message;
};

std::string read_input(const std::string& path) {
    std::stringstream text;
    if (path == "-") {
        text << std::cin.rdbuf();
        return text.str();
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw failure{2, path + ": cannot read: " + std::strerror(errno)};
    }
    text << in.rdbuf();
    return text.str();
}

// OUTPUT is written by rename from a temp file beside it: the directory must take new files.
void check_output_writable(const std::string& path) {
    if (path == "-") {
        return;
    }
    const fs::path dir = fs::absolute(path).parent_path();
    std::string probe = (dir / ".kpool-probe-XXXXXX").string();
    const int fd = ::mkstemp(probe.data());
    if (fd < 0) {
        throw failure{2, path + ": cannot write there: " + std::strerror(errno)};
    }
    ::close(fd);
    ::unlink(probe.c_str());
    if (fs::is_directory(path)) {
        throw failure{2, path + ": is a directory"};
    }
}

void write_atomically(const std::string& path, const std::string& text) {
    const fs::path target = fs::absolute(path);
    std::string temp = (target.parent_path() / ("." + target.filename().string() + ".kpool-XXXXXX")).string();
    const int fd = ::mkstemp(temp.data());
    if (fd < 0) {
        throw failure{2, path + ": cannot write: " + std::strerror(errno)};
    }
    const mode_t mask = ::umask(0);
    ::umask(mask);
    ::fchmod(fd, 0666 & ~mask); // as an ordinary file would be created; mkstemp makes 0600
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            const int e = errno;
            ::close(fd);
            ::unlink(temp.c_str());
            throw failure{2, path + ": cannot write: " + std::strerror(e)};
        }
        done += static_cast<std::size_t>(n);
    }
    if (::close(fd) != 0 || ::rename(temp.c_str(), target.c_str()) != 0) {
        const int e = errno;
        ::unlink(temp.c_str());
        throw failure{2, path + ": cannot write: " + std::strerror(e)};
    }
}

struct pool_choice {
    std::string pool;
    std::string kernel_name; // its kernelspec
    std::string language;
};

pool_choice choose_pool(client::daemon_set& daemons, const run_options& options, const json& nb) {
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
        throw failure{3, unreachable};
    }
    const json pools = status->value("pools", json::array());
    const json& spec = nb["metadata"].value("kernelspec", json::object());
    const std::string wanted_kernel =
        !options.kernel.empty() ? options.kernel : spec.is_object() ? spec.value("name", "") : "";
    std::string names;
    for (const json& p : pools) {
        if (p.value("removed", false)) {
            continue;
        }
        const std::string name = p.value("name", "");
        names += (names.empty() ? "" : ", ") + name + " (kernelspec " + p.value("kernelspec", "") + ")";
        const bool match = !options.pool.empty() ? name == options.pool
                                                 : p.value("kernelspec", "") == wanted_kernel;
        if (match) {
            const json& lang = p.value("language", json());
            return {name, p.value("kernelspec", ""), lang.is_string() ? lang.get<std::string>() : ""};
        }
    }
    if (!options.pool.empty()) {
        throw failure{2, "kpoold has no pool '" + options.pool + "'; its pools: " + names};
    }
    throw failure{2, (wanted_kernel.empty() ? std::string("the notebook names no kernelspec")
                                            : "no pool runs kernelspec '" + wanted_kernel + "'") +
                         ": choose one with --pool or -k; kpoold's pools: " +
                         (names.empty() ? std::string("none") : names)};
}

std::string notebook_language(const json& nb, const std::string& pool_language) {
    const json& meta = nb["metadata"];
    if (auto spec = meta.find("kernelspec"); spec != meta.end() && spec->is_object() &&
                                             spec->value("language", json()).is_string()) {
        return (*spec)["language"].get<std::string>();
    }
    if (auto info = meta.find("language_info"); info != meta.end() && info->is_object() &&
                                                info->value("name", json()).is_string()) {
        return (*info)["name"].get<std::string>();
    }
    return pool_language;
}

bool has_tag(const json& cell, const std::string& tag) {
    const json& tags = cell.value("metadata", json::object()).value("tags", json::array());
    return tags.is_array() && std::find(tags.begin(), tags.end(), json(tag)) != tags.end();
}

bool blank(const std::string& s) {
    return s.find_first_not_of(" \t\n\r\f\v") == std::string::npos;
}

class progress_line {
public:
    progress_line(std::FILE* log, bool on, std::size_t total) : m_log(log), m_on(on), m_total(total) {}
    void show(std::size_t done) {
        if (m_on) {
            std::fprintf(m_log, "\rkpool run: %zu/%zu cells, %.1f s", done, m_total,
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

// What stopped the run, if anything.
struct stop_reason {
    int exit_status = 0;
    std::string message;
};

class executor {
public:
    executor(json& nb, const run_options& options, std::FILE* log, client::leased_kernel& kernel)
        : m_nb(nb), m_options(options), m_log(log), m_kernel(kernel), m_outputs(nb["cells"]) {}

    // Runs every cell; what stopped it, if anything. `save` is called after every cell.
    stop_reason run(const std::function<void()>& save) {
        json& cells = m_nb["cells"];
        progress_line progress(m_log, m_options.progress, cells.size());
        stop_reason stop;
        for (std::size_t i = 0; i < cells.size() && stop.exit_status == 0 && !m_stopped_clean; ++i) {
            cell_start(cells[i], wall_clock::now());
            save();
            stop = run_cell(i);
            cell_complete(cells[i], wall_clock::now());
            save();
            progress.show(i + 1);
        }
        progress.end();
        return stop;
    }

    // The failing cell, for the error report: index, or -1.
    long failed_cell() const { return m_failed; }

private:
    stop_reason run_cell(std::size_t index) {
        json& cell = m_nb["cells"][index];
        if (cell.value("cell_type", "") != "code" || blank(cell.value("source", "")) ||
            has_tag(cell, "skip-execution")) {
            return {};
        }
        cell["metadata"]["execution"] = json::object();
        cell["outputs"] = json::array();
        const bool allow = m_options.allow_errors || has_tag(cell, "raises-exception");
        auto hooks = m_kernel.hooks();
        hooks.on_iopub = [&](const protocol::wire_message& msg) { on_iopub(msg, index); };
        jupyter::execute_request request{.code = cell.value("source", ""),
                                         .silent = false,
                                         .store_history = true,
                                         .stop_on_error = !allow,
                                         .timeout = m_options.execution_timeout};
        const jupyter::execution done = jupyter::execute(m_kernel.client(), request, hooks);
        if (!done.reply.is_null()) {
            cell["metadata"]["execution"]["shell.execute_reply"] = message_time(done.reply_header);
        }
        if (done.kernel_died) {
            fail(index);
            return {client::exit_kernel_died, "the kernel died while running cell " + std::to_string(index)};
        }
        if (done.cancelled) {
            fail(index);
            return {client::exit_interrupted, "interrupted while running cell " + std::to_string(index)};
        }
        if (done.timed_out) {
            const double s = std::chrono::duration<double>(*m_options.execution_timeout).count();
            const std::string message = "A cell timed out while it was being executed, after " +
                                        params::python_float_repr(s) + " seconds.";
            cell["outputs"].push_back({{"output_type", "error"},
                                       {"ename", "CellTimeoutError"},
                                       {"evalue", message},
                                       {"traceback", {message}}});
            fail(index);
            return {1, "cell " + std::to_string(index) + " timed out (the kernel was interrupted)"};
        }
        if (done.reply.value("status", "") == "error") {
            const std::string ename = done.reply.value("ename", "");
            const std::string evalue = done.reply.value("evalue", "");
            if (ename == "SystemExit" && (evalue.empty() || evalue == "0")) {
                m_stopped_clean = true; // sys.exit() / sys.exit(0): the run ends, successfully
                return {};
            }
            if (!allow) {
                fail(index);
                return {1, ""};
            }
        }
        return {};
    }

    void on_iopub(const protocol::wire_message& msg, std::size_t index) {
        json& cell = m_nb["cells"][index];
        const std::string type = msg.msg_type();
        json& timing = cell["metadata"]["execution"];
        if (type == "status") {
            const std::string state = msg.content.value("execution_state", "");
            if (state == "busy" || state == "idle") {
                timing["iopub.status." + state] = message_time(msg.header);
            }
        } else if (type == "execute_input") {
            timing["iopub.execute_input"] = message_time(msg.header);
        }
        json out = m_outputs.apply(msg, index);
        if (m_options.log_output && !out.is_null() && out.value("output_type", "") == "stream") {
            const bool to_stdout = out.value("name", "") == "stdout" && m_options.output != "-";
            const std::string text = out.value("text", "");
            std::fwrite(text.data(), 1, text.size(), to_stdout ? stdout : m_log);
            std::fflush(to_stdout ? stdout : m_log);
        }
    }

    void fail(std::size_t index) {
        cell_exception(m_nb, m_nb["cells"][index]);
        m_failed = static_cast<long>(index);
    }

    json& m_nb;
    const run_options& m_options;
    std::FILE* m_log;
    client::leased_kernel& m_kernel;
    notebook::output_builder m_outputs;
    long m_failed = -1;
    bool m_stopped_clean = false;
};

// The first error output of the failing cell, reported the way papermill's exception prints.
void report_error(std::FILE* log, const std::string& input, const json& cell, std::size_t index) {
    for (const json& out : cell.value("outputs", json::array())) {
        if (out.value("output_type", "") != "error") {
            continue;
        }
        std::string tb;
        for (const json& line : out.value("traceback", json::array())) {
            if (line.is_string()) {
                tb += protocol::strip_ansi(line.get<std::string>()) + "\n";
            }
        }
        const json& count = cell.value("execution_count", json());
        std::fprintf(log, "kpool: %s: cell %zu (In [%s]) raised %s: %s\n%s", input.c_str(), index,
                     count.is_null() ? "None" : count.dump().c_str(),
                     out.value("ename", "").c_str(), out.value("evalue", "").c_str(), tb.c_str());
        return;
    }
}

} // namespace

run_result run_notebook(client::daemon_set& daemons, const run_options& options, std::FILE* log) {
    try {
        const std::string input_name = options.input == "-" ? "<stdin>" : options.input;
        auto parsed = notebook::read_notebook(read_input(options.input), input_name);
        if (!parsed) {
            throw failure{2, parsed.err().message};
        }
        json nb = std::move(parsed).value();
        check_output_writable(options.output);
        const pool_choice pool = choose_pool(daemons, options, nb);
        const std::string language = notebook_language(nb, pool.language);

        std::vector<std::string> warnings;
        if (!options.parameters.empty()) {
            const auto translator = params::translator_for(pool.kernel_name, language);
            if (!translator) {
                throw failure{2, "kpool has no parameter translator for kernel '" + pool.kernel_name +
                                     "' or language '" + language + "' (it has python, R, julia, "
                                     "bash, scala, matlab and octave)"};
            }
            auto source = params::translate_parameters(*translator, options.parameters);
            if (!source) {
                throw failure{2, source.err().message};
            }
            const long declared = first_tagged_cell(nb, "parameters");
            const auto known = declared >= 0 ? params::assigned_names(
                                                   *translator, nb["cells"][static_cast<std::size_t>(declared)]
                                                                    .value("source", ""))
                                             : std::set<std::string>{};
            for (const auto& [name, value] : options.parameters.items()) {
                if (known.count(name) == 0) {
                    warnings.push_back("Passed unknown parameter: " + name);
                }
            }
            inject_parameters(nb, *source, warnings);
        }
        for (const std::string& w : warnings) {
            std::fprintf(log, "kpool: warning: %s: %s\n", input_name.c_str(), w.c_str());
        }
        prepare_metadata(nb, options.input, options.output, options.parameters, json(options.env),
                         std::string("kpool ") + kpool::version);
        auto save = [&] {
            if (options.output != "-") {
                write_atomically(options.output, notebook::write_notebook(nb));
            }
        };
        auto finish = [&](run_result r) {
            if (options.output == "-") {
                const std::string text = notebook::write_notebook(nb);
                std::fwrite(text.data(), 1, text.size(), stdout);
                std::fflush(stdout);
            } else {
                save();
            }
            return r;
        };
        if (options.prepare_only) {
            return finish({0, "prepared"});
        }

        client::catch_stop_signals();
        client::acquire_request request{.pool = pool.pool, .cwd = options.cwd, .env = options.env,
                                        .lease_s = std::nullopt, .wait = options.start_timeout};
        if (!request.cwd) {
            request.cwd = options.input == "-" ? fs::current_path().string()
                                               : fs::absolute(options.input).parent_path().string();
        }
        auto acquired = client::leased_kernel::acquire(daemons, request);
        if (auto* f = std::get_if<client::acquire_failure>(&acquired)) {
            throw failure{f->exit_status, f->message};
        }
        auto& kernel = *std::get<std::unique_ptr<client::leased_kernel>>(acquired);
        if (auto info = kernel.kernel_info().find("language_info"); info != kernel.kernel_info().end()) {
            nb["metadata"]["language_info"] = *info;
        }
        const auto start = wall_clock::now();
        notebook_start(nb, start);
        save();
        executor run(nb, options, log, kernel);
        const stop_reason stop = run.run(save);
        notebook_complete(nb, start, wall_clock::now());
        if (!stop.message.empty()) {
            std::fprintf(log, "kpool: %s: %s\n", input_name.c_str(), stop.message.c_str());
        } else if (stop.exit_status == 1 && run.failed_cell() >= 0) {
            const auto index = static_cast<std::size_t>(run.failed_cell());
            report_error(log, input_name, nb["cells"][index], index);
        }
        if (stop.exit_status == 1 && run.failed_cell() >= 0) {
            const auto index = static_cast<std::size_t>(run.failed_cell());
            insert_error_cells(nb, index, nb["cells"][index].value("execution_count", json()));
        }
        const double seconds = std::chrono::duration<double>(wall_clock::now() - start).count();
        return finish({stop.exit_status,
                       stop.exit_status == 0 ? "ok (" + std::to_string(seconds).substr(0, 5) + " s)"
                                             : stop.message.empty() ? "failed" : stop.message});
    } catch (const failure& f) {
        std::fprintf(log, "kpool: %s\n", f.message.c_str());
        return {f.exit_status, f.message};
    }
}

} // namespace kpool::runner
