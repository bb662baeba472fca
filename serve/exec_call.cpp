// exec_call: POST /v1/exec's code, one execute_request, its outputs as `kpool exec --json`; with
// `Accept: application/x-ndjson`, each output as a line when it comes, then the answer's line.
#include "serve/exec_call.hpp"

#include "notebook/nbformat.hpp"
#include "notebook/outputs.hpp"
#include "params/values.hpp"
#include "protocol/python_json.hpp"
#include "protocol/wire.hpp"
#include "serve/http_response.hpp"
#include "serve/kernel_call.hpp"
#include "serve/request_services.hpp"

namespace kpool::serve {
namespace {

using json = nlohmann::json;

class exec_call final : public kernel_call {
public:
    exec_call(request_services& owner, exchange_ptr exchange, exec_body body,
              std::chrono::steady_clock::time_point arrived)
        : kernel_call(owner, std::move(exchange), "/v1/exec", arrived), m_body(std::move(body)) {}

private:
    void run() override {
        m_cells = json::array({{{"cell_type", "code"}, {"outputs", json::array()}}});
        m_outputs = std::make_unique<notebook::output_builder>(m_cells);
        const auto accept = exchange()->header("accept");
        m_streamed = accept && accept->find("application/x-ndjson") != std::string::npos;
        if (m_streamed) { // the code runs: this is the 200; how it ends is the last line's
            exchange()->start_stream(200, "application/x-ndjson",
                                     {{"kpool-queued-ms", std::to_string(queued_ms())}});
        }
        jupyter::execute_request request{.code = m_body.code,
                                         .silent = false,
                                         .store_history = true,
                                         .stop_on_error = true,
                                         .timeout = m_body.kernel.timeout};
        auto self = std::static_pointer_cast<exec_call>(shared_from_this());
        session().execute(
            request,
            {.on_iopub = [self](const protocol::wire_message& msg) { self->on_iopub(msg); },
             .interrupt = [self] { self->interrupt(); },
             .done = [self](const jupyter::execution& done) { self->on_executed(done); }});
    }

    void on_iopub(const protocol::wire_message& msg) {
        const json out = m_outputs->apply(msg, 0);
        if (m_streamed && !out.is_null()) {
            exchange()->stream(
                protocol::to_json_text(json{{"output", notebook::output_for_file(out)}}) + "\n");
        }
    }

    // What the answer would have been, as the stream's last line: {"answer": {"status",
    // "outcome", "body"}}.
    void finish_call(http_response response) {
        if (!m_streamed) {
            return finish(std::move(response));
        }
        json answer = {{"status", response.status}};
        for (const auto& [name, value] : response.headers) {
            if (name == "kpool-outcome") {
                answer["outcome"] = value;
            }
        }
        answer["body"] = json::parse(response.body, nullptr, false);
        response.body = protocol::to_json_text(json{{"answer", answer}}) + "\n";
        finish(std::move(response));
    }

    void on_executed(const jupyter::execution& done) {
        json outputs = json::array();
        for (const json& out : m_cells[0]["outputs"]) {
            outputs.push_back(notebook::output_for_file(out));
        }
        if (done.kernel_died) {
            return finish_call(error_response(
                502, "kernel_died", with_death_reason("the kernel died while running the code"),
                {{"outputs", outputs}}));
        }
        if (done.timed_out) {
            return finish_call(error_response(
                504, "timeout",
                "the code did not finish within " +
                    params::python_float_repr(
                        std::chrono::duration<double>(*m_body.kernel.timeout).count()) +
                    " s (the kernel was interrupted)",
                {{"outputs", outputs}}));
        }
        if (done.cancelled) {
            return finish_call(cancelled_response());
        }
        json body = {{"status", done.reply.value("status", "error")},
                     {"execution_count", done.reply.value("execution_count", json())},
                     {"outputs", outputs}};
        if (body["status"] == "error") {
            for (const char* key : {"ename", "evalue", "traceback"}) {
                body[key] = done.reply.value(key, json());
            }
            // The kernel's traceback carries terminal colours; logs and dashboards want text.
            body["traceback_text"] = protocol::traceback_text(body["traceback"]);
        }
        const bool raised = body["status"] == "error";
        finish_call(with_outcome(json_response(200, body), raised ? "error" : "ok"));
    }

    exec_body m_body;
    bool m_streamed = false;
    json m_cells;
    std::unique_ptr<notebook::output_builder> m_outputs;
};

} // namespace

void start_exec_call(request_services& owner, exchange_ptr exchange, exec_body body,
                     std::chrono::steady_clock::time_point arrived) {
    const kernel_fields& k = body.kernel;
    const kernel_order wish{.pool = k.kernel.empty() ? owner.options().default_kernel : k.kernel,
                            .cwd = k.cwd,
                            .env = k.env,
                            .memory_history = true,
                            .lease = kernel_leases::call_terms(k.timeout)};
    std::make_shared<exec_call>(owner, std::move(exchange), std::move(body), arrived)->begin(wish);
}

} // namespace kpool::serve
