// leased_kernel: acquire + connect + release around the Jupyter client.
#include "client/leased_kernel.hpp"

#include "protocol/control_replies.hpp"
#include "protocol/control_requests.hpp"

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
    protocol::acquire_args args;
    args.pool = request.pool;
    args.timeout_ms = request.wait.count();
    args.cwd = request.cwd;
    args.env = request.env;
    args.lease_s = request.lease_s;
    args.memory_history = request.memory_history;
    auto answer =
        daemons.acquire(protocol::requests::acquire(args), request.wait + control_timeout);
    auto& reply = answer.reply;
    if (!reply) {
        return acquire_failure{acquire_failure::kind::unreachable, reply.err().message};
    }
    auto acquired = protocol::read_acquire_reply(*reply);
    if (!acquired) {
        return acquire_failure{acquire_failure::kind::refused,
                               std::string(to_string(acquired.err().code)) + ": " +
                                   acquired.err().message};
    }
    const std::string id = acquired->kernel_id;
    if (!acquired->connection) {
        (void)daemons.request_for_kernel(id, protocol::requests::release(id), control_timeout);
        return acquire_failure{acquire_failure::kind::refused,
                               "kpoold sent an unusable connection: " +
                                   acquired->connection.err().message};
    }
    std::unique_ptr<leased_kernel> kernel(new leased_kernel(daemons, id, *acquired->connection));
    auto ready = kernel->m_client->wait_until_ready(10000ms);
    if (!ready) {
        return acquire_failure{acquire_failure::kind::refused,
                               "kernel " + id + ": " + ready.err().message};
    }
    kernel->m_kernel_info = std::move(*ready);
    return kernel;
}

leased_kernel::~leased_kernel() {
    m_client.reset(); // our sockets close before the kernel goes
    (void)request(protocol::requests::release(m_id));
}

result<json> leased_kernel::request(const json& req) {
    return m_daemons.request_for_kernel(m_id, req, control_timeout).reply;
}

bool leased_kernel::alive() {
    auto reply = request(protocol::requests::poll(m_id));
    // No answer from kpoold says nothing about the kernel: keep waiting for it.
    if (!reply) {
        return true;
    }
    auto polled = protocol::read_poll_reply(*reply);
    if (polled && !polled->alive) {
        m_death_reason = polled->reason;
    }
    return !polled || polled->alive;
}

void leased_kernel::interrupt() { (void)request(protocol::requests::signal(m_id, SIGINT)); }

jupyter::execute_hooks leased_kernel::hooks(std::function<bool()> cancelled) {
    jupyter::execute_hooks h;
    h.alive = [this] { return alive(); };
    h.interrupt = [this] { interrupt(); };
    h.cancelled = std::move(cancelled);
    return h;
}

} // namespace kpool::client
