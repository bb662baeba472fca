// run_call: notebook in, prepared, cells through notebook_engine on the loop, answer out.
#include "serve/run_call.hpp"

#include "kpool/version.hpp"
#include "loop/logging.hpp"
#include "notebook/nbformat.hpp"
#include "params/values.hpp"
#include "protocol/python_json.hpp"
#include "protocol/text.hpp"
#include "protocol/wire.hpp"
#include "runner/cell_pipeline.hpp"
#include "runner/notebook_engine.hpp"
#include "runner/notebook_files.hpp"
#include "runner/notebook_prep.hpp"
#include "runner/papermill.hpp"
#include "serve/http_response.hpp"
#include "serve/kernel_call.hpp"
#include "serve/request_services.hpp"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kpool::serve {
namespace {

using json = nlohmann::json;
namespace fs = std::filesystem;

// The cell tagged `response`'s last output as an answer; its richest mime type wins.
std::optional<http_response> tagged_response(const json& nb) {
    const long tagged = runner::first_tagged_cell(nb, "response");
    if (tagged >= 0) {
        const json& cell = nb["cells"][static_cast<std::size_t>(tagged)];
        const json& outputs = cell.value("outputs", json::array());
        if (outputs.empty()) {
            return http_response{204, "text/plain", "", {}};
        }
        const json& out = outputs.back();
        if (out.value("output_type", "") == "stream") {
            return http_response{200, "text/plain; charset=utf-8", out.value("text", ""), {}};
        }
        const json& data = out.value("data", json::object());
        for (const char* mime : {"application/json", "text/csv", "text/html", "image/png",
                                 "image/jpeg", "image/svg+xml", "text/markdown", "text/plain"}) {
            auto it = data.find(mime);
            if (it == data.end()) {
                continue;
            }
            const std::string type(mime);
            if (type == "application/json") {
                return http_response{200, type, protocol::to_json_text(*it), {}};
            }
            const std::string text =
                it->is_string() ? it->get<std::string>() : protocol::to_json_text(*it);
            if (type == "image/png" || type == "image/jpeg") {
                auto bytes = params::base64_decode(text); // the kernel sends them base64
                if (bytes) {
                    return http_response{200, type, *bytes, {}};
                }
            }
            return http_response{
                200, type.starts_with("text/") ? type + "; charset=utf-8" : type, text, {}};
        }
        return http_response{200, "application/json", protocol::to_json_text(out), {}};
    }
    return std::nullopt;
}

class run_call final : public kernel_call {
public:
    run_call(request_services& owner, exchange_ptr exchange, json nb, run_body body,
             std::vector<std::string> warnings, std::chrono::steady_clock::time_point arrived)
        : kernel_call(owner, std::move(exchange), "/v1/run", arrived), m_nb(std::move(nb)),
          m_body(std::move(body)), m_warnings(std::move(warnings)),
          m_engine(m_nb, {.allow_errors = false, .execution_timeout = m_body.kernel.timeout}) {}

private:
    // Its cells go ahead by what the kernel is (runner::run_ahead_for).
    bool needs_kernel_info() const override { return true; }

    void run() override {
        m_start = runner::wall_clock::now();
        runner::notebook_start(m_nb, m_start);
        auto self = std::static_pointer_cast<run_call>(shared_from_this());
        // The session owns the pipeline, and this call (held by `done`) owns the session.
        kernel_session& kernel = session();
        runner::pipeline_hooks hooks;
        hooks.kernel_info = [&kernel]() -> const json& { return kernel.kernel_info(); };
        kernel.drive(
            std::make_unique<runner::cell_pipeline>(
                m_engine, kernel.sender(),
                owner().options().cells_ahead.value_or(runner::default_cells_ahead),
                std::move(hooks)),
            [self] { self->interrupt(); }, [self] { self->done(); });
    }

    void done() {
        // The kernel_info_reply came before the first cell's reply
        // (kernel_session::when_subscribed).
        const json& kernel_info = session().kernel_info();
        if (kernel_info.is_object()) {
            if (auto info = kernel_info.find("language_info"); info != kernel_info.end()) {
                m_nb["metadata"]["language_info"] = *info;
            }
        }
        const runner::stop_reason& stop = m_engine.stop();
        // A failed cell without an error output ran past its time limit.
        const bool raised =
            m_engine.failed_cell() >= 0 &&
            has_error_output(m_nb["cells"][static_cast<std::size_t>(m_engine.failed_cell())]);
        m_engine.finish(m_start, runner::wall_clock::now());
        save();
        const json failure = raised ? failure_of(m_nb) : json();
        switch (stop.outcome) {
        case runner::run_outcome::ok: return conclude(with_outcome(answer(), "ok"));
        case runner::run_outcome::cell_failed:
            if (failure.is_null()) { // over the time limit: what ran so far comes with the 504
                return conclude(error_response(504, "timeout", stop.message, made_so_far()));
            }
            return conclude(with_outcome(code_error_answer(failure), "error"));
        case runner::run_outcome::kernel_died:
            return conclude(
                error_response(502, "kernel_died", with_death_reason(stop.message), made_so_far()));
        case runner::run_outcome::interrupted: return conclude(cancelled_response());
        default: return conclude(error_response(500, "internal", stop.message));
        }
    }

    // Every answer to a run says what papermill would have warned of (`Kpool-Warnings`, a JSON
    // list: "Passed unknown parameter: x"), which `kpool run --url` prints as kpool run does.
    void conclude(http_response response) {
        if (!m_warnings.empty()) {
            json list = json::array();
            for (const std::string& w : m_warnings) {
                list.push_back(protocol::echo_safe(w));
            }
            response.headers.emplace_back("kpool-warnings", list.dump());
        }
        finish(std::move(response));
    }

    static bool has_error_output(const json& cell) {
        const json& outputs = cell.value("outputs", json::array());
        return std::any_of(outputs.begin(), outputs.end(),
                           [](const json& out) { return out.value("output_type", "") == "error"; });
    }

    // The error that stopped the run, as the finished notebook has it (after papermill's marker
    // cells went in): the last code cell with an error output, `cell` its index; null if none.
    static json failure_of(const json& nb) {
        const json& cells = nb["cells"];
        for (std::size_t i = cells.size(); i-- > 0;) {
            for (const json& out : cells[i].value("outputs", json::array())) {
                if (out.value("output_type", "") == "error") {
                    return {{"cell", i},
                            {"ename", out.value("ename", "")},
                            {"evalue", out.value("evalue", "")},
                            {"traceback", out.value("traceback", json())},
                            {"traceback_text",
                             protocol::traceback_text(out.value("traceback", json()))}};
                }
            }
        }
        return nullptr;
    }

    // The answer to a run whose cells all ran, in the shape the request asked for.
    http_response answer() const {
        if (m_body.outputs_only) {
            return json_response(200, {{"cells", code_cell_outputs()}});
        }
        if (auto tagged = tagged_response(m_nb)) {
            return std::move(*tagged);
        }
        return {200, "application/x-ipynb+json", notebook::write_notebook(m_nb), {}};
    }

    // A cell raised: the code ran to its end, so the request was served (200, docs/serve.md's
    // rule), in the shape asked for: the executed notebook as `kpool run` writes it (papermill's
    // error marker included), the outputs with the error beside them, or, for a notebook that
    // answers with a tagged cell, which never ran, the error itself.
    http_response code_error_answer(const json& failure) const {
        if (m_body.outputs_only) {
            return json_response(200, {{"cells", code_cell_outputs()}, {"error", failure}});
        }
        if (runner::first_tagged_cell(m_nb, "response") >= 0) {
            json body = {{"error", "cell_error"},
                         {"message", "cell " + std::to_string(failure["cell"].get<std::size_t>()) +
                                         " raised " + failure["ename"].get<std::string>()}};
            body.update(failure);
            return json_response(200, body);
        }
        return {200, "application/x-ipynb+json", notebook::write_notebook(m_nb), {}};
    }

    // What a run cut short (504, 502) had made: the notebook so far, or its outputs.
    json made_so_far() const {
        if (m_body.outputs_only) {
            return {{"cells", code_cell_outputs()}};
        }
        return {{"notebook", json::parse(notebook::write_notebook(m_nb))}}; // as a file has it
    }

    json code_cell_outputs() const {
        json cells = json::array();
        for (std::size_t i = 0; i < m_nb["cells"].size(); ++i) {
            const json& cell = m_nb["cells"][i];
            if (cell.value("cell_type", "") == "code") {
                json outputs = json::array();
                for (const json& out : cell.value("outputs", json::array())) {
                    outputs.push_back(notebook::output_for_file(out));
                }
                cells.push_back({{"cell", i}, {"outputs", outputs}});
            }
        }
        return cells;
    }

    // --save-dir: the executed notebook, whatever its outcome, as SAVE_DIR/REQUEST_ID.ipynb.
    void save() {
        const std::string& dir = owner().options().save_dir;
        if (dir.empty()) {
            return;
        }
        const std::string path = dir + "/" + exchange()->request_id() + ".ipynb";
        if (auto st = runner::write_atomically(path, notebook::write_notebook(m_nb)); !st) {
            loop::logger("serve")->warn("cannot save {}: {}", path, st.err().message);
        }
    }

    json m_nb;
    run_body m_body;
    std::vector<std::string> m_warnings;
    runner::notebook_engine m_engine;
    runner::wall_clock::time_point m_start;
};

result<std::string> read_file(const fs::path& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return error{errc::internal, "cannot read the notebook"};
    }
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
}

// The notebook read: papermill's preparation, then a kernel for it. `folder`: the kernel's
// working directory unless the body says one (empty: the kernel's own).
template <class Refuse>
void start_prepared(request_services& owner, exchange_ptr& exchange, json nb,
                    const std::string& path, const std::string& folder, run_body body,
                    std::chrono::steady_clock::time_point arrived, const Refuse& refuse) {
    runner::load_notebook(nb, std::string("kpool ") + kpool::version);
    const std::string kernel = runner::nb_kernel_name(nb, body.kernel.kernel);
    if (kernel.empty()) {
        return refuse(
            error_response(400, "bad_request", "the notebook names no kernelspec: say \"kernel\""));
    }
    auto prepared = runner::prepare_notebook(nb, {.kernel_name = kernel,
                                                  .language = runner::nb_language(nb, "", ""),
                                                  .parameters = body.parameters,
                                                  .input_path = path,
                                                  .output_path = "",
                                                  .environment = json(body.kernel.env),
                                                  .report_mode = body.report_mode});
    if (!prepared) {
        return refuse(error_response(400, "bad_request", prepared.err().message));
    }
    const kernel_order wish{.pool = kernel,
                            .cwd = body.kernel.cwd.empty() ? folder : body.kernel.cwd,
                            .env = body.kernel.env,
                            .memory_history = true,
                            .lease = kernel_leases::call_terms(std::nullopt)};
    std::make_shared<run_call>(owner, std::move(exchange), std::move(nb), std::move(body),
                               std::move(*prepared), arrived)
        ->begin(wish);
}

} // namespace

void start_run_call(request_services& owner, exchange_ptr exchange, const std::string& path,
                    run_body body, std::chrono::steady_clock::time_point arrived) {
    auto refuse = [&](http_response r) {
        owner.metrics().answered(
            "/v1/run", r.status,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - arrived).count());
        exchange->respond(std::move(r));
        owner.request_finished();
    };
    if (!body.notebook.empty()) { // POST /v1/run: the caller's own notebook
        auto parsed = notebook::read_notebook(body.notebook, "the body's notebook");
        if (!parsed) {
            return refuse(error_response(400, "bad_request", parsed.err().message));
        }
        return start_prepared(owner, exchange, std::move(parsed).value(), "", "", std::move(body),
                              arrived, refuse);
    }
    const std::string& root = owner.options().root;
    if (root.empty()) {
        return refuse(error_response(404, "not_found",
                                     "kpool serve runs no notebooks: start it with --root DIR"));
    }
    // H2O resolved `..` already; the real path must still lie under the root (no symlink out).
    std::error_code ec;
    const fs::path real = fs::weakly_canonical(fs::path(root) / fs::path(path).relative_path(), ec);
    const fs::path real_root = fs::weakly_canonical(root, ec);
    const auto rel = real.lexically_relative(real_root);
    if (ec || path.empty() || rel.empty() || rel.begin()->string() == ".." ||
        !fs::is_regular_file(real, ec)) {
        return refuse(
            error_response(404, "not_found", "no notebook at " + protocol::echo_safe(path)));
    }
    auto text = read_file(real);
    if (!text) {
        return refuse(error_response(500, "internal", text.err().message));
    }
    auto parsed = notebook::read_notebook(*text, path);
    if (!parsed) {
        return refuse(error_response(500, "bad_notebook", parsed.err().message));
    }
    start_prepared(owner, exchange, std::move(parsed).value(), path, real.parent_path().string(),
                   std::move(body), arrived, refuse);
}

} // namespace kpool::serve
