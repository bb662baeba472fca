// leased_kernel: acquire + connect + release around the Jupyter client.
#include "client/leased_kernel.hpp"

#include <csignal>

namespace kpool::client {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr auto control_timeout = 5000ms;

} // namespace

leased_kernel::leased_kernel(daemon_set& daemons, std::string id,
                             const protocol::connection_info& info)
    : m_daemons(daemons), m_id(std::move(id)),
      m_client(std::make_unique<jupyter::kernel_client>(m_zmq, info)) {}

std::variant<std::unique_ptr<leased_kernel>, acquire_failure>
leased_kernel::acquire(daemon_set& daemons, const acquire_request& request) {
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
    if (request.memory_history) {
        req["history"] = "memory";
    }
    auto answer = daemons.acquire(req, request.wait + control_timeout);
    auto& reply = answer.reply;
    if (!reply) {
        return acquire_failure{acquire_failure::kind::unreachable, reply.err().message};
    }
    if (!reply->value("ok", false)) {
        const json& e = reply->value("error", json::object());
        return acquire_failure{acquire_failure::kind::refused, e.value("code", std::string("internal")) + ": " +
                                      e.value("message", std::string())};
    }
    auto info = protocol::connection_info_from_json(reply->value("connection", json::object()));
    const std::string id = reply->value("kernel_id", std::string());
    if (!info) {
        (void)daemons.request_for_kernel(id, {{"op", "release"}, {"kernel_id", id}}, control_timeout);
        return acquire_failure{acquire_failure::kind::refused, "kpoold sent an unusable connection: " + info.err().message};
    }
    std::unique_ptr<leased_kernel> kernel(new leased_kernel(daemons, id, *info));
    auto ready = kernel->m_client->wait_until_ready(10000ms);
    if (!ready) {
        return acquire_failure{acquire_failure::kind::refused, "kernel " + id + ": " + ready.err().message};
    }
    kernel->m_kernel_info = std::move(*ready);
    return kernel;
}

leased_kernel::~leased_kernel() {
    m_client.reset(); // our sockets close before the kernel goes
    (void)request({{"op", "release"}, {"kernel_id", m_id}});
}

result<json> leased_kernel::request(const json& req) {
    return m_daemons.request_for_kernel(m_id, req, control_timeout).reply;
}

bool leased_kernel::alive() {
    auto reply = request({{"op", "poll"}, {"kernel_id", m_id}});
    // No answer from kpoold says nothing about the kernel: keep waiting for it.
    return !reply || !reply->value("ok", false) || reply->value("alive", true);
}

void leased_kernel::interrupt() {
    (void)request({{"op", "signal"}, {"kernel_id", m_id}, {"signum", SIGINT}});
}

jupyter::execute_hooks leased_kernel::hooks(std::function<bool()> cancelled) {
    jupyter::execute_hooks h;
    h.alive = [this] { return alive(); };
    h.interrupt = [this] { interrupt(); };
    h.cancelled = std::move(cancelled);
    return h;
}

} // namespace kpool::client
