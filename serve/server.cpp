// server: a request's route (serve/routing) carried out, admission (429), health, metrics, the
// pools' pace for Retry-After, and the orderly stop. The code-running flows are exec_call.cpp
// and run_call.cpp.
#include "serve/server.hpp"

#include "loop/logging.hpp"
#include "protocol/control_replies.hpp"
#include "protocol/control_requests.hpp"

#include "serve/exec_call.hpp"
#include "serve/gateway.hpp"
#include "serve/gateway_sessions.hpp"
#include "serve/held_kernels.hpp"
#include "serve/http_response.hpp"
#include "serve/kernel_call.hpp"
#include "serve/routing.hpp"
#include "serve/run_call.hpp"
#include "serve/spare_kernels.hpp"

#include <sodium.h>

#include <algorithm>
#include <cmath>
#include <variant>

namespace kpool::serve {

using json = nlohmann::json;
using namespace std::chrono_literals;

// The listen address is an IP address (checked by the HTTP layer): the front door's rule for it.
bool is_loopback(const std::string& host) { return is_loopback_host(host); }

server::server(uv_loop_t* loop, serve_options options)
    : m_loop(loop),
      m_options(std::move(options)), m_door{.token_required = !m_options.token.empty(),
                                            .tls = !m_options.cert_file.empty(),
                                            .allow_origins = m_options.allow_origins,
                                            .allow_hosts = m_options.allow_hosts},
      m_zmq(1), m_leases(*this, m_options.gateway.kernel_lease), m_reaper(loop), m_closing(loop),
      m_grace(loop), m_pace_timer(loop) {}

server::~server() {
    m_spares.reset();
    m_resolver.reset();
    m_sessions.reset(); // names the gateway's kernels
    m_gateway.reset();
    m_http.reset();
    m_held.reset();
    m_daemons.clear();
}

result<std::unique_ptr<server>> server::start(uv_loop_t* loop, serve_options options) {
    if (options.token.empty() && !is_loopback(options.host)) {
        return error{errc::bad_request, "listening on " + options.host +
                                            " (not loopback) needs a token: anyone who reaches "
                                            "the port could run code otherwise"};
    }
    if (options.token.empty() &&
        std::find(options.allow_origins.begin(), options.allow_origins.end(), "*") !=
            options.allow_origins.end()) {
        return error{errc::bad_request,
                     "--allow-origin '*' needs a token: without one, every web page the user "
                     "opens could run code through kpool serve"};
    }
    if (options.endpoints.empty()) {
        return error{errc::bad_request, "no kpoold endpoint to front"};
    }
    if (sodium_init() < 0) {
        return error{errc::internal, "libsodium failed to initialise"};
    }
    std::unique_ptr<server> s(new server(loop, std::move(options)));
    server* self = s.get();
    self->set_endpoints(s->m_options.endpoints);
    if (endpoint_resolver::needed(s->m_options.endpoint_setting)) {
        s->m_resolver = std::make_unique<endpoint_resolver>(
            loop, s->m_options.endpoint_setting, s->m_options.resolve_every,
            [self](const std::vector<std::string>& endpoints) { self->set_endpoints(endpoints); });
    }
    auto http = http_server::start(loop,
                                   {.host = s->m_options.host,
                                    .port = s->m_options.port,
                                    .max_body = s->m_options.max_body,
                                    .max_connections = s->m_options.max_connections,
                                    .cert_file = s->m_options.cert_file,
                                    .key_file = s->m_options.key_file},
                                   [self](exchange_ptr ex) { self->on_request(std::move(ex)); });
    if (!http) {
        return http.err();
    }
    s->m_http = std::move(*http);
    s->m_held = std::make_unique<held_kernels>(*s);
    s->m_gateway = std::make_unique<gateway>(*s);
    s->m_sessions = std::make_unique<gateway_sessions>(*s->m_gateway, s->m_options.root);
    s->m_spares = std::make_unique<spare_kernels>(*s, s->m_options.spares);
    s->m_held->after_tick([self] { self->m_spares->top_up(); });
    s->m_pace_timer.start(
        0ms,
        [self] {
            self->control(
                protocol::requests::status(), 2000ms,
                [self](result<json> reply, std::size_t daemon) {
                    auto pools = reply ? protocol::read_status_pools(*reply)
                                       : result<std::vector<protocol::pool_summary>>(reply.err());
                    if (!pools) {
                        return;
                    }
                    for (const protocol::pool_summary& p : *pools) {
                        self->m_pace[p.name] = {p.time_to_warm_s_p50.value_or(1.0),
                                                std::max(1, p.size)};
                    }
                    self->m_spread.learn_status(self->m_daemons[daemon]->endpoint(), *pools);
                });
        },
        2000ms);
    s->m_pace_timer.unref();
    return s;
}

void server::on_request(exchange_ptr ex) {
    const auto arrived = std::chrono::steady_clock::now();
    const std::string label = route_label(ex->path());
    auto answer = [&](http_response r) {
        m_metrics.answered(
            label, r.status,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - arrived).count());
        ex->respond(std::move(r));
    };
    // Nothing was read of a body over the limit, and nothing will run: 413 first (H2O's
    // internal redirect for it keeps none of the request's headers).
    if (ex->body_too_large()) {
        return answer(error_response(413, "too_large",
                                     "the request body is over the limit of " +
                                         std::to_string(m_options.max_body) +
                                         " bytes (--max-body)"));
    }
    if (ex->header_bytes() > m_options.max_header) {
        return answer(error_response(431, "headers_too_large",
                                     "the request's headers are over the limit of " +
                                         std::to_string(m_options.max_header) +
                                         " bytes (--max-header)"));
    }
    const door_request door{.method = ex->method(),
                            .host = ex->authority(),
                            .origin = ex->header("origin"),
                            .content_type = ex->header("content-type"),
                            .sec_fetch_site = ex->header("sec-fetch-site"),
                            .authorization = ex->header("authorization")};
    for (auto& [name, value] : cors_headers(door, m_door, m_options.cors, ex->method() == "OPTIONS",
                                            ex->header("access-control-request-headers"))) {
        ex->add_header(std::move(name), std::move(value));
    }
    if (auto refused = check_front_door(door, m_door)) {
        return answer(std::move(*refused));
    }
    route decision = decide({.method = ex->method(),
                             .path = ex->path(),
                             .query = ex->query(),
                             .body = ex->body(),
                             .authorization = ex->header("authorization")},
                            m_options.token, static_cast<bool>(m_on_shut_down));
    // One handler per kind of route (serve/routing.hpp): a route the visit misses fails to build.
    struct dispatch {
        server& self;
        exchange_ptr& ex;
        const std::string& label;
        std::chrono::steady_clock::time_point arrived;
        std::function<void(http_response)> answer;

        void operator()(http_response& now) const { answer(std::move(now)); }
        void operator()(do_health&) const { self.health(std::move(ex)); }
        void operator()(do_gateway& g) const { self.m_gateway->handle(std::move(ex), g); }
        void operator()(do_session& s) const { self.m_sessions->handle(std::move(ex), s); }
        void operator()(do_preflight&) const {
            answer({204, "text/plain", "", {}}); // its CORS headers, if any, are on the exchange
        }
        void operator()(do_metrics&) const {
            self.m_metrics.connections().Set(static_cast<double>(self.m_http->open_connections()));
            answer({200, "text/plain; version=0.0.4", self.m_metrics.text(), {}});
        }
        void operator()(do_exec& exec) const {
            if (self.admit(label, ex, arrived)) {
                start_exec_call(self, std::move(ex), std::move(exec.body), arrived);
            }
        }
        void operator()(do_run& run) const {
            if (self.admit(label, ex, arrived)) {
                start_run_call(self, std::move(ex), run.path, std::move(run.body), arrived);
            }
        }
    };
    std::visit(dispatch{*this, ex, label, arrived, answer}, decision);
}

bool server::admit(const std::string& label, const exchange_ptr& ex,
                   std::chrono::steady_clock::time_point arrived) {
    if (m_metrics.waiting().Value() >= static_cast<double>(m_options.max_queue)) {
        m_metrics.rejected().Increment();
        http_response r = overloaded_response(std::to_string(m_options.max_queue) +
                                                  " requests already wait for a kernel",
                                              retry_after(""));
        m_metrics.answered(
            label, r.status,
            std::chrono::duration<double>(std::chrono::steady_clock::now() - arrived).count());
        ex->respond(std::move(r));
        return false;
    }
    ++m_active;
    m_metrics.in_flight().Increment();
    return true;
}

void server::health(exchange_ptr ex) {
    const auto arrived = std::chrono::steady_clock::now();
    control(
        protocol::requests::status(), 2000ms,
        [this, ex, arrived](result<json> reply, std::size_t daemon) {
            json body = {{"status", "unavailable"}};
            int code = 503;
            auto listed = reply ? protocol::read_status_pools(*reply)
                                : result<std::vector<protocol::pool_summary>>(reply.err());
            if (listed) {
                body["daemon"] = m_daemons[daemon]->endpoint();
                json pools = json::object();
                bool serving = false;
                bool open_pool = false;
                for (const protocol::pool_summary& p : *listed) {
                    if (p.removed || p.drained) {
                        continue;
                    }
                    serving = serving || p.warm > 0 || !p.failing;
                    open_pool = open_pool || !p.sandboxed;
                    pools[p.name] = {{"warm", p.warm},
                                     {"starting", p.starting},
                                     {"failing", p.failing},
                                     {"isolation", p.sandboxed ? "sandbox" : "none"}};
                }
                body["pools"] = pools;
                // Whether code sent here could reach kpoold, other requests or the next one: "none"
                // while any pool a request may name runs kernels without a sandbox.
                body["isolation"] = open_pool ? "none" : "sandbox";
                if (serving) {
                    body["status"] = "ok";
                    code = 200;
                } else {
                    body["message"] = "no pool has or can start a kernel";
                }
            } else {
                body["message"] = listed.err().message;
            }
            m_metrics.answered(
                "/v1/health", code,
                std::chrono::duration<double>(std::chrono::steady_clock::now() - arrived).count());
            ex->respond(json_response(code, body));
        });
}

void server::warn_of_unsandboxed_pools(std::function<void(const std::string&)> warn) {
    control(protocol::requests::status(), 10000ms,
            [warn = std::move(warn)](result<json> reply, std::size_t) {
                auto listed = reply ? protocol::read_status_pools(*reply)
                                    : result<std::vector<protocol::pool_summary>>(reply.err());
                if (!listed) {
                    return;
                }
                std::string open;
                for (const protocol::pool_summary& p : *listed) {
                    if (!p.removed && !p.sandboxed) {
                        open += (open.empty() ? "" : ", ") + p.name;
                    }
                }
                if (!open.empty()) {
                    warn("warning: /v1 runs code on pools without a sandbox (" + open +
                         "): a request's code can reach kpoold, other requests' kernels and the "
                         "next request; "
                         "set isolation = \"sandbox\" on pools that run code you did not write "
                         "(docs/security.md)");
                }
            });
}

void server::set_endpoints(const std::vector<std::string>& endpoints) {
    std::vector<bool> listed(m_daemons.size(), false);
    for (const std::string& endpoint : endpoints) {
        auto it = std::find_if(m_daemons.begin(), m_daemons.end(),
                               [&](const auto& d) { return d->endpoint() == endpoint; });
        if (it != m_daemons.end()) {
            listed[static_cast<std::size_t>(it - m_daemons.begin())] = true;
        } else {
            m_daemons.push_back(
                std::make_unique<control_channel>(m_loop, m_zmq, endpoint, m_options.keys));
            listed.push_back(true);
        }
    }
    const bool first = m_listed.empty();
    m_listed.resize(listed.size(), false);
    for (std::size_t i = 0; i < listed.size() && !first; ++i) {
        if (listed[i] && !m_listed[i]) {
            loop::logger("serve")->info(
                "kpoold {} joined (the endpoint setting resolves to it now)",
                m_daemons[i]->endpoint());
        } else if (!listed[i] && m_listed[i]) {
            loop::logger("serve")->info(
                "kpoold {} left (the endpoint setting no longer resolves to it)",
                m_daemons[i]->endpoint());
        }
    }
    m_listed = std::move(listed);
}

void server::control(json request, std::chrono::milliseconds timeout, control_done done) {
    // The listed daemons: for an acquire, in the order client/spread.hpp gives for its pool
    // (most warm first); any other request (status, health, kernelspecs) from the next in turn,
    // so that each daemon is asked in its turn, not by chance; daemons down lately last.
    const std::size_t n = m_daemons.size();
    const std::size_t first = n == 0 ? 0 : m_next_daemon++ % n;
    std::vector<std::string> endpoints;
    std::map<std::string, std::size_t> index;
    for (std::size_t k = 0; k < n; ++k) {
        const std::size_t i = (first + k) % n;
        if (m_listed[i]) {
            endpoints.push_back(m_daemons[i]->endpoint());
            index.emplace(m_daemons[i]->endpoint(), i);
        }
    }
    if (request.value("op", "") == "acquire") {
        endpoints = m_spread.order(request.value("pool", ""), endpoints);
    } else {
        std::stable_partition(endpoints.begin(), endpoints.end(),
                              [&](const std::string& e) { return !m_spread.is_down(e); });
    }
    std::vector<std::size_t> order;
    for (const std::string& e : endpoints) {
        order.push_back(index.at(e));
    }
    auto attempt = std::make_shared<control_attempt>(
        control_attempt{std::move(request), std::chrono::steady_clock::now() + timeout,
                        std::move(done), std::move(order), 0, "no kpoold endpoint resolves now"});
    try_daemon(std::move(attempt));
}

void server::try_daemon(std::shared_ptr<control_attempt> a) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        a->deadline - std::chrono::steady_clock::now());
    if (a->at == a->order.size() || (a->at > 0 && left.count() <= 0)) {
        if (a->last_refusal) {
            return a->done(std::move(*a->last_refusal), a->refused_by);
        }
        return a->done(error{errc::unavailable, a->last_error}, 0);
    }
    const std::size_t daemon = a->order[a->at++];
    const std::string endpoint = m_daemons[daemon]->endpoint();
    const bool acquire = protocol::requests::op_of(a->request) == "acquire";
    json request = a->request;
    if (acquire && a->at > 1) {
        // A later daemon waits for a kernel only as long as the caller still does.
        std::optional<std::int64_t> asked;
        if (auto it = request.find("timeout_ms"); it != request.end() && it->is_number_integer()) {
            asked = it->get<std::int64_t>();
        }
        request["timeout_ms"] = client::spread::attempt_timeout_ms(asked, left);
    }
    m_daemons[daemon]->request(
        std::move(request), left, [this, a, daemon, endpoint, acquire](result<json> reply) {
            if (!reply) {
                m_spread.mark_down(endpoint);
                a->last_error = reply.err().message;
                return try_daemon(a);
            }
            if (acquire) {
                const std::string pool = a->request.value("pool", "");
                auto acquired = protocol::read_acquire_reply(*reply);
                if (acquired) {
                    m_spread.learn_acquired(endpoint, pool, acquired->pool_warm);
                } else if (client::spread::fails_over(acquired.err()) && a->at < a->order.size()) {
                    m_spread.learn_refused(endpoint, pool);
                    a->last_refusal = std::move(*reply);
                    a->refused_by = daemon;
                    return try_daemon(a);
                }
            }
            a->done(std::move(reply), daemon);
        });
}

void server::control_at(std::size_t daemon, json request, std::chrono::milliseconds timeout,
                        std::function<void(result<json>)> done) {
    m_daemons.at(daemon)->request(std::move(request), timeout, std::move(done));
}

void server::retire_later(std::shared_ptr<void> thing) {
    m_retired.push_back(std::move(thing));
    m_reaper.start(0ms, [this] { m_retired.clear(); });
}

void server::request_finished() {
    --m_active;
    m_metrics.in_flight().Decrement();
    if (m_active == 0) {
        m_spares->top_up(); // not while a request runs: its kernel would share the CPU with the
                            // handshake
    }
    finish_shutdown_if_idle();
}

std::pair<double, double> server::warm_and_fallback(const std::string& pool, double waiting) const {
    // Before any request held a kernel: the time to warm one per kernel the pool keeps, per waiter.
    double fallback = 1;
    double warm = 0;
    for (const auto& [name, pace] : m_pace) {
        if (pool.empty() || name == pool) {
            fallback = std::max(fallback, pace.time_to_warm_s * (1 + waiting / pace.size));
            warm = std::max(warm, pace.time_to_warm_s);
        }
    }
    return {warm, fallback};
}

int server::retry_after(const std::string& pool) {
    const double waiting = m_metrics.waiting_now();
    const auto [warm, fallback] = warm_and_fallback(pool, waiting);
    return m_waits[pool].refused(std::chrono::steady_clock::now(), waiting, warm, fallback);
}

std::optional<int> server::refusal_at_once(const std::string& pool) {
    const double waiting = m_metrics.waiting_now();
    if (waiting < 1) {
        return std::nullopt; // a kernel may be free now: never refuse what could run at once
    }
    // Behind those waiting inside only: a caller back at its turn cannot be told from a new one,
    // and the callers told to come back after it are not ahead of it.
    const auto wait = m_waits[pool].expected_wait(std::chrono::steady_clock::now(), waiting,
                                                  warm_and_fallback(pool, waiting).first, false);
    if (!wait || *wait <= std::chrono::duration<double>(m_options.queue_timeout).count()) {
        return std::nullopt;
    }
    return retry_after(pool);
}

void server::kernel_taken(const std::string& pool, std::chrono::steady_clock::time_point at) {
    m_waits[pool].took(at);
    if (!pool.empty()) {
        m_waits[""].took(at); // "" is every pool's
    }
}

void server::kernel_returned(const std::string& pool, std::chrono::steady_clock::time_point taken,
                             bool used) {
    const auto now = std::chrono::steady_clock::now();
    m_waits[pool].returned(taken, now, used);
    if (!pool.empty()) {
        m_waits[""].returned(taken, now, used);
    }
}

void server::track(const std::shared_ptr<kernel_call>& call) {
    std::erase_if(m_calls, [](const std::weak_ptr<kernel_call>& c) { return c.expired(); });
    m_calls.push_back(call);
}

void server::stop_running_code() {
    for (const auto& c : m_calls) {
        if (auto call = c.lock()) {
            call->stop();
        }
    }
}

void server::shut_down(std::chrono::milliseconds grace, std::function<void()> done) {
    m_on_shut_down = std::move(done);
    m_http->stop_listening();
    m_grace.start(grace, [this] { stop_running_code(); });
    // Both flags first: either may be done at once, and finish only when both are.
    m_gateway_releasing = true;
    m_spares_releasing = true;
    m_gateway->release_all([this] {
        m_gateway_releasing = false;
        finish_shutdown_if_idle();
    });
    m_spares->release_all([this] {
        m_spares_releasing = false;
        finish_shutdown_if_idle();
    });
}

void server::finish_shutdown_if_idle() {
    if (!m_on_shut_down || m_active != 0 || m_gateway_releasing || m_spares_releasing ||
        m_closing.active()) {
        return;
    }
    // Every answer is out: the connections close; a client that keeps one open gets two seconds.
    m_http->close_connections();
    const auto give_up = std::chrono::steady_clock::now() + 2s;
    m_closing.start(
        0ms,
        [this, give_up] {
            if (m_http->open_connections() > 0 && std::chrono::steady_clock::now() < give_up) {
                return;
            }
            m_closing.stop();
            m_grace.stop();
            auto done = std::move(m_on_shut_down);
            m_on_shut_down = [] {}; // still stopping: new requests get 503
            done();
        },
        20ms);
}

} // namespace kpool::serve
