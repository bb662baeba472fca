// kpool serve: the HTTP front door. Checks each request at the door (serve/front_door.hpp: Host,
// Origin, body type), routes it, checks the caller's token, and runs
// POST /v1/exec and POST/GET /v1/run/{path} on a fresh warm kernel from the kpoolds it fronts
// (released after), answering 429 with Retry-After when no kernel comes within the queue
// timeout or too many wait. Also GET /v1/health and GET /metrics. Everything runs on one libuv
// loop: no thread per request.
#pragma once

#include "client/spread.hpp"
#include "serve/control_channel.hpp"
#include "serve/endpoint_resolver.hpp"
#include "serve/http_server.hpp"
#include "serve/kernel_leases.hpp"
#include "serve/kernel_session.hpp"
#include "serve/request_services.hpp"
#include "serve/serve_metrics.hpp"
#include "serve/serve_options.hpp"
#include "serve/wait_estimate.hpp"

#include <nlohmann/json.hpp>
#include <uv.h>
#include <zmq.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <vector>

namespace kpool::serve {

class kernel_call;
class gateway;
class gateway_sessions;
class held_kernels;
class spare_kernels;

class server final : public request_services {
public:
    // Listens at once; an error says why it cannot (address in use, no token off loopback).
    static result<std::unique_ptr<server>> start(uv_loop_t* loop, serve_options options);
    ~server();
    server(const server&) = delete;
    server& operator=(const server&) = delete;

    int port() const { return m_http->port(); }

    // Stops accepting; requests in flight finish (their kernels released), then `done`. After
    // `grace`, code still running is interrupted and its request answered 503.
    void shut_down(std::chrono::milliseconds grace, std::function<void()> done);
    // What the grace's end does, now: code still running is interrupted, its request answered 503.
    void stop_running_code();
    // Asks kpoold's status once and calls `warn` with a line if a pool /v1 may run code on has
    // no sandbox (run_server does, when it listens beyond loopback).
    void warn_of_unsandboxed_pools(std::function<void(const std::string&)> warn);

    // request_services, for the requests' flows.
    const serve_options& options() const override { return m_options; }
    serve_metrics& metrics() override { return m_metrics; }
    uv_loop_t* loop() const override { return m_loop; }
    zmq::context_t& zmq() override { return m_zmq; }
    void control(nlohmann::json request, std::chrono::milliseconds timeout,
                 control_done done) override;
    void control_at(std::size_t daemon, nlohmann::json request, std::chrono::milliseconds timeout,
                    std::function<void(result<nlohmann::json>)> done) override;
    kernel_leases& leases() override { return m_leases; }
    void request_finished() override;
    void kernel_taken(const std::string& pool, std::chrono::steady_clock::time_point at) override;
    void kernel_returned(const std::string& pool, std::chrono::steady_clock::time_point taken,
                         bool used) override;
    std::optional<int> refusal_at_once(const std::string& pool) override;
    // The pool's median time to warm a kernel (from kpoold's status, refreshed every 2 s) times
    // the queue ahead of it per kernel the pool keeps warm, from 1 to 60. `pool` empty: the
    // slowest pool's.
    int retry_after(const std::string& pool) override;
    // The pool's time to warm a kernel, and a Retry-After before any request held one.
    std::pair<double, double> warm_and_fallback(const std::string& pool, double waiting) const;
    void track(const std::shared_ptr<kernel_call>& call) override;
    spare_kernels& spares() override { return *m_spares; }
    held_kernels& held() override { return *m_held; }

private:
    server(uv_loop_t* loop, serve_options options);
    void on_request(exchange_ptr exchange);
    void health(exchange_ptr exchange);
    // Back-pressure before a request takes a place: false (answered 429) when max_queue
    // requests already wait for a kernel; else it counts as in flight until request_finished.
    bool admit(const std::string& label, const exchange_ptr& ex,
               std::chrono::steady_clock::time_point arrived);
    void finish_shutdown_if_idle();
    void retire_later(std::shared_ptr<void> thing) override;
    // A control request on its way through the daemons in `order`: to the next on a transport
    // failure, and (an acquire) on a refusal another daemon may not give (client/spread.hpp).
    struct control_attempt {
        nlohmann::json request;
        std::chrono::steady_clock::time_point deadline;
        control_done done;
        std::vector<std::size_t> order;
        std::size_t at = 0; // the next to try
        std::string last_error;
        std::optional<nlohmann::json> last_refusal{};
        std::size_t refused_by = 0;
    };
    void try_daemon(std::shared_ptr<control_attempt> attempt);
    // A fresh resolution of the endpoint setting: new daemons join, missing ones get no new
    // requests (those about kernels they handed out still go to them).
    void set_endpoints(const std::vector<std::string>& endpoints);

    uv_loop_t* m_loop;
    serve_options m_options;
    door_policy m_door;
    zmq::context_t m_zmq;
    serve_metrics m_metrics;
    kernel_leases m_leases;
    std::vector<std::unique_ptr<control_channel>> m_daemons; // only ever appended to: indices stay
    std::vector<bool> m_listed; // per daemon: in the last resolution of the endpoint setting
    std::unique_ptr<endpoint_resolver> m_resolver;
    client::spread m_spread;       // where acquires go: warm kernels per daemon, daemons down
    std::size_t m_next_daemon = 0; // where any other control request goes first
    std::unique_ptr<held_kernels> m_held; // reset after its holders (the gateway, the spares)
    std::unique_ptr<gateway> m_gateway;   // reset first in ~server: its websockets need H2O
    std::unique_ptr<gateway_sessions> m_sessions; // /api/sessions, over m_gateway's kernels
    bool m_gateway_releasing = false; // shut_down: until kpoold has the gateway's kernels back
    std::unique_ptr<spare_kernels> m_spares;
    bool m_spares_releasing = false; // shut_down: until kpoold has the spares back
    std::unique_ptr<http_server> m_http;
    std::vector<std::shared_ptr<void>> m_retired;
    loop::uv_timer m_reaper;
    loop::uv_timer m_closing; // after shut_down: waits for the connections to close
    loop::uv_timer m_grace;   // after shut_down: then running code is interrupted
    std::vector<std::weak_ptr<kernel_call>> m_calls;
    struct pool_pace {
        double time_to_warm_s = 1;
        int size = 1;
    };
    std::map<std::string, pool_pace> m_pace; // from the last status
    // The pace at which requests give kernels back, per pool asked for and for all ("").
    std::map<std::string, wait_estimate> m_waits;
    loop::uv_timer m_pace_timer;
    std::size_t m_active = 0; // requests whose answer or cleanup is still to come
    std::function<void()> m_on_shut_down;
};

} // namespace kpool::serve
