// kernel_call: acquire -> ready -> (the request's run) -> answer -> release, on the loop.
#include "serve/kernel_call.hpp"

#include "loop/logging.hpp"
#include "protocol/control_replies.hpp"
#include "serve/deadlines.hpp"
#include "serve/http_response.hpp"
#include "serve/request_services.hpp"
#include "serve/spare_kernels.hpp"

namespace kpool::serve {

using json = nlohmann::json;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {
constexpr auto call_poll_every = 1000ms; // is the kernel alive, is the caller still there
} // namespace

kernel_call::kernel_call(request_services& owner, exchange_ptr exchange, std::string route,
                         steady::time_point arrived)
    : m_owner(owner), m_exchange(std::move(exchange)), m_route(std::move(route)),
      m_arrived(arrived), m_poll(owner.loop()) {}

void kernel_call::begin(const kernel_wish& wish) {
    m_wish = wish;
    m_owner.track(shared_from_this());
    if (auto spare = m_owner.spares().take(wish.pool)) {
        return take_spare(std::move(*spare));
    }
    acquire();
}

void kernel_call::acquire() {
    if (const auto turn = m_owner.refusal_at_once(m_wish.pool)) {
        m_owner.metrics().rejected().Increment();
        return finish(overloaded_response(
            "requests already wait for a kernel of pool " + m_wish.pool +
                " and this one would wait past the queue timeout: come back in " +
                std::to_string(*turn) + " s",
            *turn));
    }
    protocol::acquire_args request;
    request.pool = m_wish.pool;
    request.timeout_ms = m_owner.options().queue_timeout.count();
    // The cwd, env and history go with the acquire: kpoold applies them in one message to the
    // kernel before it replies (a context op after the reply was a second trip to the kernel).
    request.memory_history = m_wish.memory_history;
    if (!m_wish.cwd.empty()) {
        request.cwd = m_wish.cwd;
    }
    request.env = m_wish.env;
    request.lease_s = kernel_leases::call_lease_s(m_wish.timeout);
    m_owner.metrics().waiting().Increment();
    m_owner.leases().acquire(
        request,
        [self = shared_from_this()](result<kernel_lease> lease, kernel_leases::refusal_fn refusal) {
            self->on_acquired(std::move(lease), std::move(refusal));
        });
}

void kernel_call::take_spare(spare_kernels::spare spare) {
    m_lease = std::move(spare.lease);
    took_kernel();
    m_exchange->set_kernel_id(m_lease.kernel_id);
    m_session = std::make_unique<kernel_session>(m_owner.loop(), std::move(spare.channels));
    if (m_exchange->gone()) {
        return finish(cancelled_response());
    }
    // A spare's lease is kpool serve's short one: the request's own from now on. The renew also
    // proves the spare still lives: it may have died (alone, or with its daemon) since its last
    // poll. Then the request acquires a fresh kernel instead, as if there had been no spare.
    const auto lease = kernel_leases::call_lease_s(m_wish.timeout);
    m_renews = !lease;
    m_watch = {};
    const unsigned attempt = ++m_attempt;
    m_owner.leases().renew(
        m_lease, lease ? *lease : static_cast<double>(m_owner.leases().holder_lease().count()),
        [self = shared_from_this(), attempt](bool held) {
            if (self->m_finished || attempt != self->m_attempt) {
                return;
            }
            if (held) {
                self->m_owner.metrics().kernels_used().Increment();
                return self->prepared(attempt);
            }
            loop::logger("serve")->info("spare kernel {} is gone: the request takes a fresh one",
                                        self->m_lease.kernel_id);
            self->give_back();
            ++self->m_attempt; // what is still to come for the spare is ignored
            self->m_renews = false;
            self->acquire();
        });
    prepare(true, 1, false);
}

void kernel_call::on_acquired(result<kernel_lease> lease,
                              const kernel_leases::refusal_fn& refusal) {
    m_owner.metrics().waiting().Decrement();
    if (!lease) {
        http_response answer = refusal();
        if (answer.status == 429) {
            m_owner.metrics().rejected().Increment();
        }
        return finish(std::move(answer));
    }
    m_lease = std::move(*lease);
    took_kernel();
    m_exchange->set_kernel_id(m_lease.kernel_id);
    m_owner.metrics().kernels_used().Increment();
    m_owner.spares().used(m_wish.pool);
    if (m_exchange->gone()) {
        return finish(cancelled_response());
    }
    m_session = std::make_unique<kernel_session>(m_owner.loop(), m_owner.zmq(), m_lease.connection);
    ++m_attempt;
    prepare(false, 0, true);
}

void kernel_call::prepare(bool subscribed, int other_steps, bool context_applied) {
    const unsigned attempt = m_attempt;
    // A spare was acquired before anyone knew what it was for: its cwd, env and history are
    // applied here.
    const bool context =
        !context_applied && (!m_wish.cwd.empty() || !m_wish.env.empty() || m_wish.memory_history);
    m_steps_left = other_steps + (subscribed ? 0 : 1) + (context ? 1 : 0);
    if (m_steps_left == 0) {
        m_steps_left = 1;
        return prepared(attempt);
    }
    // At once: the context goes through kpoold to the kernel's control channel (or a silent
    // cell), the handshake is ours on shell and iopub; the code waits for both. It must wait for
    // the context: a forked kernel applies it on its control thread, which nothing orders
    // before a cell sent on shell, and a cell must start in the request's cwd and env.
    if (context) {
        m_owner.leases().apply_context(
            m_lease, m_wish.cwd, m_wish.env, m_wish.memory_history,
            [self = shared_from_this(), attempt](std::optional<http_response> failure, bool) {
                if (attempt != self->m_attempt) {
                    return; // a spare found gone meanwhile
                }
                if (failure) {
                    return self->finish(std::move(*failure));
                }
                self->prepared(attempt);
            });
    }
    if (!subscribed) {
        auto answered = [self = shared_from_this(), attempt](result<json> ready) {
            if (attempt != self->m_attempt) {
                return;
            }
            if (!ready) {
                return self->finish(error_response(
                    502, "kernel_died", "the kernel did not answer: " + ready.err().message));
            }
            self->prepared(attempt);
        };
        if (needs_kernel_info()) {
            m_session->when_ready(kernel_ready_timeout, std::move(answered));
        } else {
            m_session->when_subscribed(kernel_ready_timeout, std::move(answered));
        }
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
    m_poll.start(
        call_poll_every,
        [weak = weak_from_this()] {
            if (auto call = weak.lock()) {
                call->poll();
            }
        },
        call_poll_every);
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
        // Not `unavailable`: that one promises nothing ran, so a client may send it again.
        return error_response(503, "stopped", "kpool serve stopped: the code was interrupted");
    }
    return error_response(499, "cancelled", "the caller went away");
}

void kernel_call::interrupt() { m_owner.leases().interrupt(m_lease); }

long long kernel_call::queued_ms() const {
    const auto until = m_taken_at == steady::time_point{} ? steady::now() : m_taken_at;
    return std::chrono::duration_cast<std::chrono::milliseconds>(until - m_arrived).count();
}

void kernel_call::poll() {
    if (!m_session) {
        return;
    }
    if (m_exchange->gone()) {
        m_session->cancel();
        return;
    }
    if (m_renews) {
        m_owner.leases().renew_when_due(m_lease, m_watch);
    }
    m_owner.leases().poll(m_lease, [self = shared_from_this()](result<json> reply) {
        if (kernel_leases::gone_after(self->m_watch, reply) && self->m_session) {
            if (reply) {
                if (auto polled = protocol::read_poll_reply(*reply)) {
                    self->m_death_reason = polled->reason;
                }
            }
            self->m_session->kernel_died();
        }
    });
}

void kernel_call::took_kernel() {
    m_taken_at = steady::now();
    m_owner.kernel_taken(m_wish.pool, m_taken_at);
}

void kernel_call::finish(http_response response) {
    if (m_finished) {
        return; // prepare()'s other step failed too, after the first had answered
    }
    m_finished = true;
    m_owner.metrics().answered(m_route, response.status,
                               std::chrono::duration<double>(steady::now() - m_arrived).count());
    // How long the request waited for its kernel: a client's measure of the queue in front of
    // it (remote/feed_policy.hpp), which its latency alone cannot tell from the code's own time.
    response.headers.emplace_back("kpool-queued-ms", std::to_string(queued_ms()));
    m_exchange->respond(std::move(response));
    m_poll.stop();
    if (m_session) {
        m_owner.retire(std::move(m_session));
    }
    if (m_lease.kernel_id.empty()) {
        m_owner.request_finished();
        return;
    }
    m_owner.kernel_returned(m_wish.pool, m_taken_at, true);
    m_owner.leases().release(m_lease,
                             [self = shared_from_this()] { self->m_owner.request_finished(); });
    m_lease.kernel_id.clear();
}

void kernel_call::give_back() {
    if (m_session) {
        m_owner.retire(std::move(m_session));
    }
    if (!m_lease.kernel_id.empty()) {
        // Gone, most likely (then kpoold answers unknown_kernel); if only its daemon did not
        // answer in time, this gives the kernel back all the same. Not a hold of a request's.
        m_owner.kernel_returned(m_wish.pool, m_taken_at, false);
        m_owner.leases().release(m_lease);
        m_lease.kernel_id.clear();
    }
}

} // namespace kpool::serve
