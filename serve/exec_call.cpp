// exec_call: acquire -> ready -> execute -> answer -> release, each step a callback on the loop.
#include "serve/exec_call.hpp"

#include "notebook/nbformat.hpp"
#include "notebook/outputs.hpp"
#include "params/values.hpp"
#include "protocol/connection_info.hpp"
#include "protocol/control.hpp"
#include "serve/api_error.hpp"
#include "serve/server.hpp"

#include <cmath>
#include <csignal>

namespace kpool::serve {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

constexpr auto control_margin = 5000ms; // kpoold's own deadline first, then ours
constexpr auto ready_timeout = 10000ms;
constexpr auto poll_every = 1000ms;     // is the kernel alive, is the caller still there

class exec_call : public std::enable_shared_from_this<exec_call> {
public:
    exec_call(server& owner, exchange_ptr exchange, exec_body body, steady::time_point arrived)
        : m_owner(owner), m_exchange(std::move(exchange)), m_body(std::move(body)), m_arrived(arrived),
          m_poll(owner.loop()) {}

    void begin() {
        const serve_options& o = m_owner.options();
        json request = {{"op", "acquire"},
                        {"pool", m_body.kernel.empty() ? o.default_kernel : m_body.kernel},
                        {"timeout_ms", o.queue_timeout.count()}};
        if (m_body.timeout) {
            // Should this process die, the kernel still comes back soon after.
            request["lease_s"] = std::ceil(std::chrono::duration<double>(*m_body.timeout).count()) + 60;
        }
        if (!m_body.cwd.empty()) {
            request["cwd"] = m_body.cwd;
        }
        if (!m_body.env.empty()) {
            request["env"] = m_body.env;
        }
        m_owner.metrics().waiting().Increment();
        m_owner.control(request, o.queue_timeout + control_margin,
                        [self = shared_from_this()](result<json> reply, std::size_t daemon) {
                            self->on_acquired(std::move(reply), daemon);
                        });
    }

private:
    void on_acquired(result<json> reply, std::size_t daemon) {
        m_owner.metrics().waiting().Decrement();
        if (!reply) {
            return finish(error_response(503, "unavailable", "no kpoold answered: " + reply.err().message));
        }
        if (!reply->value("ok", false)) {
            const bool back_pressure = reply->value("error", json::object()).value("code", "") != "unknown_pool";
            http_response r = acquire_refusal(reply->value("error", json::object()), 1);
            if (r.status == 429 && back_pressure) {
                m_owner.metrics().rejected().Increment();
            }
            return finish(std::move(r));
        }
        m_daemon = daemon;
        m_kernel_id = reply->value("kernel_id", "");
        m_owner.metrics().kernels_used().Increment();
        auto info = protocol::connection_info_from_json(reply->value("connection", json::object()));
        if (!info || m_exchange->gone()) {
            return finish(error_response(502, "daemon_error", info ? "the caller went away"
                                                                   : "kpoold's connection info: " + info.err().message));
        }
        m_session = std::make_unique<kernel_session>(m_owner.loop(), m_owner.zmq(), *info);
        m_session->when_ready(ready_timeout, [self = shared_from_this()](const status& st) { self->on_ready(st); });
    }

    void on_ready(const status& st) {
        if (!st) {
            return finish(error_response(502, "kernel_died", "the kernel did not answer: " + st.err().message));
        }
        m_cells = json::array({{{"cell_type", "code"}, {"outputs", json::array()}}});
        m_outputs = std::make_unique<notebook::output_builder>(m_cells);
        jupyter::execute_request request{.code = m_body.code, .silent = false, .store_history = true,
                                         .stop_on_error = true, .timeout = m_body.timeout};
        auto self = shared_from_this();
        m_session->execute(request,
                           {.on_iopub = [self](const protocol::wire_message& msg) { self->m_outputs->apply(msg, 0); },
                            .interrupt = [self] { self->interrupt(); },
                            .done = [self](const jupyter::execution& done) { self->on_executed(done); }});
        m_poll.start(poll_every, [self] { self->poll(); }, poll_every);
    }

    void interrupt() {
        m_owner.control_at(m_daemon, {{"op", "signal"}, {"kernel_id", m_kernel_id}, {"signum", SIGINT}},
                           control_margin, [](result<json>) {});
    }

    // Every second while the code runs: a caller that went away cancels it, a dead kernel ends it.
    void poll() {
        if (m_exchange->gone() && m_session) {
            m_session->cancel();
            return;
        }
        m_owner.control_at(m_daemon, {{"op", "poll"}, {"kernel_id", m_kernel_id}}, control_margin,
                           [self = shared_from_this()](result<json> reply) {
                               if (reply && reply->value("ok", false) && !reply->value("alive", true) &&
                                   self->m_session) {
                                   self->m_session->kernel_died();
                               }
                           });
    }

    void on_executed(const jupyter::execution& done) {
        m_poll.stop();
        json outputs = json::array();
        for (const json& out : m_cells[0]["outputs"]) {
            outputs.push_back(notebook::output_for_file(out));
        }
        if (done.kernel_died) {
            return finish(error_response(502, "kernel_died", "the kernel died while running the code",
                                         {{"outputs", outputs}}));
        }
        if (done.timed_out) {
            return finish(error_response(
                504, "timeout",
                "the code did not finish within " +
                    params::python_float_repr(std::chrono::duration<double>(*m_body.timeout).count()) +
                    " s (the kernel was interrupted)",
                {{"outputs", outputs}}));
        }
        if (done.cancelled) {
            return finish(error_response(499, "cancelled", "the caller went away"));
        }
        json body = {{"status", done.reply.value("status", "error")},
                     {"execution_count", done.reply.value("execution_count", json())},
                     {"outputs", outputs}};
        if (body["status"] == "error") {
            for (const char* key : {"ename", "evalue", "traceback"}) {
                body[key] = done.reply.value(key, json());
            }
        }
        finish(json_response(200, body));
    }

    // Answers (once) and gives the kernel back; the request is over when kpoold has it.
    void finish(http_response response) {
        if (!m_finished) {
            m_finished = true;
            m_owner.metrics().answered("/v1/exec", response.status,
                                       std::chrono::duration<double>(steady::now() - m_arrived).count());
            m_exchange->respond(std::move(response));
        }
        if (m_session) {
            m_owner.retire(std::move(m_session));
        }
        m_poll.stop();
        if (m_kernel_id.empty()) {
            m_owner.request_finished();
            return;
        }
        m_owner.control_at(m_daemon, {{"op", "release"}, {"kernel_id", m_kernel_id}}, control_margin,
                           [self = shared_from_this()](result<json>) { self->m_owner.request_finished(); });
        m_kernel_id.clear();
    }

    server& m_owner;
    exchange_ptr m_exchange;
    exec_body m_body;
    steady::time_point m_arrived;
    std::size_t m_daemon = 0;
    std::string m_kernel_id;
    std::unique_ptr<kernel_session> m_session;
    json m_cells;
    std::unique_ptr<notebook::output_builder> m_outputs;
    daemon::uv_timer m_poll;
    bool m_finished = false;
};

} // namespace

void start_exec_call(server& owner, exchange_ptr exchange, exec_body body, steady::time_point arrived) {
    std::make_shared<exec_call>(owner, std::move(exchange), std::move(body), arrived)->begin();
}

} // namespace kpool::serve
