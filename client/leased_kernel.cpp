// leased_kernel: acquire + connect + release around the Jupyter client.
#include "client/leased_kernel.hpp"

#include <csignal>

namespace kpool::client {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

volatile std::sig_atomic_t caught_signal = 0;

constexpr auto control_timeout = 5000ms;

} // namespace

void catch_stop_signals() {
    struct sigaction action{};
    action.sa_handler = [](int signum) { caught_signal = signum; };
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0; // no SA_RESTART: a poll in progress returns, and we look at the flag
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
}

int stop_signal() { return caught_signal; }

leased_kernel::leased_kernel(control_client& control, std::string id,
                             const protocol::connection_info& info)
    : m_control(control), m_id(std::move(id)),
      m_client(std::make_unique<jupyter::kernel_client>(m_zmq, info)) {}

std::variant<std::unique_ptr<leased_kernel>, acquire_failure>
leased_kernel::acquire(control_client& control, const acquire_request& request) {
    json req{{"op", "acquire"}, {"pool", request.pool}, {"timeout_ms", request.wait.count()}};
    if (request.cwd) {
        req["cwd"] = *request.cwd;
    }
    if (!request.env.empty()) {
        req["env"] = request.env;
    }
    if (request.lease_s) {
        req["lease_s"] = *request.lease_s;
    }
    auto reply = control.request(req, request.wait + control_timeout);
    if (!reply) {
        return acquire_failure{3, reply.err().message};
    }
    if (!reply->value("ok", false)) {
        const json& e = reply->value("error", json::object());
        return acquire_failure{1, e.value("code", std::string("internal")) + ": " +
                                      e.value("message", std::string())};
    }
    auto info = protocol::connection_info_from_json(reply->value("connection", json::object()));
    const std::string id = reply->value("kernel_id", std::string());
    if (!info) {
        (void)control.request({{"op", "release"}, {"kernel_id", id}}, control_timeout);
        return acquire_failure{1, "kpoold sent an unusable connection: " + info.err().message};
    }
    std::unique_ptr<leased_kernel> kernel(new leased_kernel(control, id, *info));
    auto ready = kernel->m_client->wait_until_ready(10000ms);
    if (!ready) {
        return acquire_failure{1, "kernel " + id + ": " + ready.err().message};
    }
    kernel->m_kernel_info = std::move(*ready);
    return kernel;
}

leased_kernel::~leased_kernel() {
    m_client.reset(); // our sockets close before the kernel goes
    (void)m_control.request({{"op", "release"}, {"kernel_id", m_id}}, control_timeout);
}

bool leased_kernel::alive() {
    auto reply = m_control.request({{"op", "poll"}, {"kernel_id", m_id}}, control_timeout);
    // No answer from kpoold says nothing about the kernel: keep waiting for it.
    return !reply || !reply->value("ok", false) || reply->value("alive", true);
}

void leased_kernel::interrupt() {
    (void)m_control.request({{"op", "signal"}, {"kernel_id", m_id}, {"signum", SIGINT}},
                            control_timeout);
}

jupyter::execute_hooks leased_kernel::hooks() {
    jupyter::execute_hooks h;
    h.alive = [this] { return alive(); };
    h.interrupt = [this] { interrupt(); };
    h.cancelled = [] { return stop_signal() != 0; };
    return h;
}

} // namespace kpool::client
