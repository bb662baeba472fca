// kernel_call: acquire -> ready -> (the request's run) -> answer -> release, on the loop.
#include "serve/kernel_call.hpp"

#include "protocol/connection_info.hpp"
#include "serve/deadlines.hpp"
#include "serve/http_response.hpp"
#include "serve/server.hpp"

#include <cmath>
#include <csignal>

namespace kpool::serve {

using json = nlohmann::json;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {
constexpr auto call_poll_every = 1000ms; // is the kernel alive, is the caller still there
} // namespace

kernel_call::kernel_call(server& owner, exchange_ptr exchange, std::string route, steady::time_point arrived)
    : m_owner(owner), m_exchange(std::move(exchange)), m_route(std::move(route)), m_arrived(arrived),
      m_poll(owner.loop()) {}

void kernel_call::begin(const kernel_wish& wish) {
    const serve_options& o = m_owner.options();
    m_pool = wish.pool;
    json request = {{"op", "acquire"}, {"pool", wish.pool}, {"timeout_ms", o.queue_timeout.count()}};
    if (wish.timeout) {
        // Should this process die, the kernel still comes back soon after.
        request["lease_s"] = std::ceil(std::chrono::duration<double>(*wish.timeout).count()) + 60;
    }
    if (!wish.cwd.empty()) {
        request["cwd"] = wish.cwd;
    }
    if (!wish.env.empty()) {
        request["env"] = wish.env;
    }
    m_owner.metrics().waiting().Increment();
    m_owner.track(shared_from_this());
    m_owner.control(request, o.queue_timeout + control_margin,
                    [self = shared_from_this()](result<json> reply, std::size_t daemon) {
                        self->on_acquired(std::move(reply), daemon);
                    });
}

void kernel_call::on_acquired(result<json> reply, std::size_t daemon) {
    m_owner.metrics().waiting().Decrement();
    if (!reply) {
        return finish(error_response(503, "unavailable", "no kpoold answered: " + reply.err().message));
    }
    if (!reply->value("ok", false)) {
        http_response r = acquire_refusal(reply->value("error", json::object()), m_owner.retry_after(m_pool));
        if (r.status == 429) {
            m_owner.metrics().rejected().Increment();
        }
        return finish(std::move(r));
    }
    m_daemon = daemon;
    m_kernel_id = reply->value("kernel_id", "");
    m_exchange->set_kernel_id(m_kernel_id);
    m_owner.metrics().kernels_used().Increment();
    auto info = protocol::connection_info_from_json(reply->value("connection", json::object()));
    if (!info) {
        return finish(error_response(502, "daemon_error", "kpoold's connection info: " + info.err().message));
    }
    if (m_exchange->gone()) {
        return finish(cancelled_response());
    }
    m_session = std::make_unique<kernel_session>(m_owner.loop(), m_owner.zmq(), *info);
    m_session->when_subscribed(kernel_ready_timeout, [self = shared_from_this()](result<json> subscribed) {
        if (!subscribed) {
            return self->finish(error_response(502, "kernel_died",
                                               "the kernel did not answer: " + subscribed.err().message));
        }
        // Weak: the timer is the call's own, and must not keep the call alive (a cycle).
        self->m_poll.start(call_poll_every, [weak = self->weak_from_this()] {
            if (auto call = weak.lock()) {
                call->poll();
            }
        }, call_poll_every);
        self->run();
    });
}

void kernel_call::stop() {
    m_stopped = true;
    if (m_session && !m_finished) {
        m_session->cancel();
    }
}

http_response kernel_call::cancelled_response() const {
    if (m_stopped) {
        return error_response(503, "unavailable", "kpool serve stopped: the code was interrupted");
    }
    return error_response(499, "cancelled", "the caller went away");
}

void kernel_call::interrupt() {
    m_owner.control_at(m_daemon, {{"op", "signal"}, {"kernel_id", m_kernel_id}, {"signum", SIGINT}},
                       control_margin, [](result<json>) {});
}

void kernel_call::poll() {
    if (!m_session) {
        return;
    }
    if (m_exchange->gone()) {
        m_session->cancel();
        return;
    }
    m_owner.control_at(m_daemon, {{"op", "poll"}, {"kernel_id", m_kernel_id}}, control_margin,
                       [self = shared_from_this()](result<json> reply) {
                           // Kernels die with their daemon: one that stays unreachable for a few
                           // polls took this kernel with it.
                           self->m_unanswered_polls = reply ? 0 : self->m_unanswered_polls + 1;
                           const bool dead = (reply && reply->value("ok", false) && !reply->value("alive", true)) ||
                                             self->m_unanswered_polls >= 3;
                           if (dead && self->m_session) {
                               self->m_session->kernel_died();
                           }
                       });
}

void kernel_call::finish(http_response response) {
    if (!m_finished) {
        m_finished = true;
        m_owner.metrics().answered(m_route, response.status,
                                   std::chrono::duration<double>(steady::now() - m_arrived).count());
        m_exchange->respond(std::move(response));
    }
    m_poll.stop();
    if (m_session) {
        m_owner.retire(std::move(m_session));
    }
    if (m_kernel_id.empty()) {
        m_owner.request_finished();
        return;
    }
    m_owner.control_at(m_daemon, {{"op", "release"}, {"kernel_id", m_kernel_id}}, control_margin,
                       [self = shared_from_this()](result<json>) { self->m_owner.request_finished(); });
    m_kernel_id.clear();
}

} // namespace kpool::serve
