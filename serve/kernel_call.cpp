// kernel_call: acquire -> ready -> (the request's run) -> answer -> release, on the loop.
#include "serve/kernel_call.hpp"

#include "protocol/connection_info.hpp"
#include "serve/deadlines.hpp"
#include "serve/http_response.hpp"
#include "serve/server.hpp"
#include "serve/spare_kernels.hpp"
#include "daemon/loop/logging.hpp"

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

namespace {
// The lease a request's kernel is held under: its time limit and a minute, so that kernels come
// back soon after a kpool serve that died.
std::optional<double> lease_for(const kernel_wish& wish) {
    if (!wish.timeout) {
        return std::nullopt;
    }
    return std::ceil(std::chrono::duration<double>(*wish.timeout).count()) + 60;
}
} // namespace

void kernel_call::begin(const kernel_wish& wish) {
    m_wish = wish;
    m_owner.track(shared_from_this());
    if (auto spare = m_owner.spares().take(wish.pool)) {
        return take_spare(std::move(*spare));
    }
    acquire();
}

void kernel_call::acquire() {
    const serve_options& o = m_owner.options();
    json request = {{"op", "acquire"}, {"pool", m_wish.pool}, {"timeout_ms", o.queue_timeout.count()}};
    if (m_wish.memory_history) {
        request["history"] = "memory"; // applied before the reply: no round trip of its own
    }
    if (const auto lease = lease_for(m_wish)) {
        request["lease_s"] = *lease;
    }
    m_owner.metrics().waiting().Increment();
    m_owner.control(request, o.queue_timeout + control_margin,
                    [self = shared_from_this()](result<json> reply, std::size_t daemon) {
                        self->on_acquired(std::move(reply), daemon);
                    });
}

void kernel_call::take_spare(spare_kernels::spare spare) {
    const serve_options& o = m_owner.options();
    m_daemon = spare.lease.daemon;
    m_kernel_id = std::move(spare.lease.kernel_id);
    m_exchange->set_kernel_id(m_kernel_id);
    m_session = std::make_unique<kernel_session>(m_owner.loop(), std::move(spare.channels));
    if (m_exchange->gone()) {
        return finish(cancelled_response());
    }
    // A spare's lease is kpool serve's short one: the request's own from now on. The renew also
    // proves the spare still lives: it may have died (alone, or with its daemon) since its last
    // poll. Then the request acquires a fresh kernel instead, as if there had been no spare.
    const auto lease = lease_for(m_wish);
    if (!lease) {
        m_renew_lease = o.gateway.kernel_lease;
    }
    m_renewed = steady::now();
    const unsigned attempt = ++m_attempt;
    m_owner.control_at(m_daemon,
                       {{"op", "renew"},
                        {"kernel_id", m_kernel_id},
                        {"lease_s", lease ? *lease : static_cast<double>(o.gateway.kernel_lease.count())}},
                       control_margin, [self = shared_from_this(), attempt](result<json> reply) {
                           if (self->m_finished || attempt != self->m_attempt) {
                               return;
                           }
                           if (reply && reply->value("ok", false)) {
                               self->m_owner.metrics().kernels_used().Increment();
                               return self->prepared(attempt);
                           }
                           daemon::logger("serve")->info("spare kernel {} is gone: the request takes a fresh one",
                                                         self->m_kernel_id);
                           self->give_back();
                           ++self->m_attempt; // what is still to come for the spare is ignored
                           self->m_renew_lease.reset();
                           self->acquire();
                       });
    prepare(true, 1);
}

void kernel_call::on_acquired(result<json> reply, std::size_t daemon) {
    m_owner.metrics().waiting().Decrement();
    if (!reply) {
        return finish(error_response(503, "unavailable", "no kpoold answered: " + reply.err().message));
    }
    if (!reply->value("ok", false)) {
        http_response r = acquire_refusal(reply->value("error", json::object()), m_owner.retry_after(m_wish.pool));
        if (r.status == 429) {
            m_owner.metrics().rejected().Increment();
        }
        return finish(std::move(r));
    }
    m_daemon = daemon;
    m_kernel_id = reply->value("kernel_id", "");
    m_exchange->set_kernel_id(m_kernel_id);
    m_owner.metrics().kernels_used().Increment();
    m_owner.spares().used(m_wish.pool);
    auto info = protocol::connection_info_from_json(reply->value("connection", json::object()));
    if (!info) {
        return finish(error_response(502, "daemon_error", "kpoold's connection info: " + info.err().message));
    }
    if (m_exchange->gone()) {
        return finish(cancelled_response());
    }
    m_session = std::make_unique<kernel_session>(m_owner.loop(), m_owner.zmq(), *info);
    ++m_attempt;
    prepare(false, 0);
}

void kernel_call::prepare(bool subscribed, int other_steps) {
    const unsigned attempt = m_attempt;
    // A spare was acquired before anyone knew what it was for: its history is moved here.
    const bool context = !m_wish.cwd.empty() || !m_wish.env.empty() || (m_wish.memory_history && subscribed);
    m_steps_left = other_steps + (subscribed ? 0 : 1) + (context ? 1 : 0);
    if (m_steps_left == 0) {
        m_steps_left = 1;
        return prepared(attempt);
    }
    // At once: the context goes through kpoold to the kernel's control channel (or a silent
    // cell), the handshake is ours on shell and iopub; the code waits for both.
    if (context) {
        json request = {{"op", "context"}, {"kernel_id", m_kernel_id}};
        if (!m_wish.cwd.empty()) {
            request["cwd"] = m_wish.cwd;
        }
        if (!m_wish.env.empty()) {
            request["env"] = m_wish.env;
        }
        if (m_wish.memory_history) {
            request["history"] = "memory";
        }
        m_owner.control_at(m_daemon, request, kernel_ready_timeout + control_margin,
                           [self = shared_from_this(), attempt](result<json> reply) {
                               if (attempt != self->m_attempt) {
                                   return; // a spare found gone meanwhile
                               }
                               if (!reply) {
                                   return self->finish(error_response(
                                       503, "unavailable", "kpoold did not apply cwd/env: " + reply.err().message));
                               }
                               if (!reply->value("ok", false)) {
                                   return self->finish(context_refusal(reply->value("error", json::object())));
                               }
                               self->prepared(attempt);
                           });
    }
    if (!subscribed) {
        m_session->when_subscribed(kernel_ready_timeout, [self = shared_from_this(), attempt](result<json> ready) {
            if (attempt != self->m_attempt) {
                return;
            }
            if (!ready) {
                return self->finish(
                    error_response(502, "kernel_died", "the kernel did not answer: " + ready.err().message));
            }
            self->prepared(attempt);
        });
    }
}

void kernel_call::prepared(unsigned attempt) {
    if (m_finished || attempt != m_attempt || --m_steps_left > 0) {
        return;
    }
    if (m_stopped || m_exchange->gone()) {
        return finish(cancelled_response()); // while it was prepared: no code runs
    }
    // Weak: the timer is the call's own, and must not keep the call alive (a cycle).
    m_poll.start(call_poll_every, [weak = weak_from_this()] {
        if (auto call = weak.lock()) {
            call->poll();
        }
    }, call_poll_every);
    run();
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
    if (m_renew_lease && steady::now() - m_renewed >= *m_renew_lease / 3) {
        m_renewed = steady::now();
        m_owner.control_at(m_daemon,
                           {{"op", "renew"}, {"kernel_id", m_kernel_id},
                            {"lease_s", static_cast<double>(m_renew_lease->count())}},
                           control_margin, [](result<json>) {});
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
    if (m_finished) {
        return; // prepare()'s other step failed too, after the first had answered
    }
    m_finished = true;
    m_owner.metrics().answered(m_route, response.status,
                               std::chrono::duration<double>(steady::now() - m_arrived).count());
    m_exchange->respond(std::move(response));
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

void kernel_call::give_back() {
    if (m_session) {
        m_owner.retire(std::move(m_session));
    }
    if (!m_kernel_id.empty()) {
        // Gone, most likely (then kpoold answers unknown_kernel); if only its daemon did not
        // answer in time, this gives the kernel back all the same.
        m_owner.control_at(m_daemon, {{"op", "release"}, {"kernel_id", m_kernel_id}}, control_margin,
                           [](result<json>) {});
        m_kernel_id.clear();
    }
}

} // namespace kpool::serve
