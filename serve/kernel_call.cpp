// kernel_call: obtain -> (the request's run) -> answer -> release, on the loop.
#include "serve/kernel_call.hpp"

#include "serve/http_response.hpp"
#include "serve/request_services.hpp"

namespace kpool::serve {

using steady = std::chrono::steady_clock;

kernel_call::kernel_call(request_services& owner, exchange_ptr exchange, std::string route,
                         steady::time_point arrived)
    : m_owner(owner), m_exchange(std::move(exchange)), m_route(std::move(route)),
      m_arrived(arrived) {}

void kernel_call::begin(kernel_order order) {
    m_pool = order.pool;
    m_owner.track(shared_from_this());
    order.wait = m_owner.options().queue_timeout;
    order.for_caller = true;
    order.all_ports = false; // shell and iopub are all a request uses
    order.needs_kernel_info = needs_kernel_info();
    m_terms = order.lease;
    m_owner.held().obtain(order, [self = shared_from_this()](obtained kernel) {
        self->on_obtained(std::move(kernel));
    });
}

void kernel_call::on_obtained(obtained kernel) {
    if (auto* no = std::get_if<refusal>(&kernel)) {
        return finish(std::move(no->answer));
    }
    connected_kernel& k = std::get<connected_kernel>(kernel);
    m_lease = k.lease;
    took_kernel();
    m_exchange->set_kernel_id(m_lease.kernel_id);
    m_session = std::make_unique<kernel_session>(m_owner.loop(), std::move(k.channels));
    if (m_stopped || m_exchange->gone()) {
        return finish(cancelled_response()); // while it was obtained: no code runs
    }
    // Weak: the registry must not keep the call alive.
    const std::weak_ptr<kernel_call> weak = weak_from_this();
    m_watch = m_owner.held().watch(m_lease, m_terms,
                                   {.on_gone =
                                        [weak](const kernel_gone& gone) {
                                            if (auto call = weak.lock(); call && call->m_session) {
                                                call->m_death_reason = gone.reason;
                                                call->m_session->kernel_died();
                                            }
                                        },
                                    .on_tick =
                                        [weak] {
                                            if (auto call = weak.lock(); call && call->m_session &&
                                                                         call->m_exchange->gone()) {
                                                call->m_session->cancel();
                                            }
                                        }});
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

void kernel_call::took_kernel() {
    m_taken_at = steady::now();
    m_owner.kernel_taken(m_pool, m_taken_at);
}

void kernel_call::finish(http_response response) {
    if (m_finished) {
        return;
    }
    m_finished = true;
    m_owner.metrics().answered(m_route, response.status,
                               std::chrono::duration<double>(steady::now() - m_arrived).count());
    // How long the request waited for its kernel: a client's measure of the queue in front of
    // it (remote/feed_policy.hpp), which its latency alone cannot tell from the code's own time.
    response.headers.emplace_back("kpool-queued-ms", std::to_string(queued_ms()));
    m_exchange->respond(std::move(response));
    m_watch.reset();
    if (m_session) {
        m_owner.retire(std::move(m_session));
    }
    if (m_lease.kernel_id.empty()) {
        m_owner.request_finished();
        return;
    }
    m_owner.kernel_returned(m_pool, m_taken_at, true);
    m_owner.leases().release(m_lease,
                             [self = shared_from_this()] { self->m_owner.request_finished(); });
    m_lease.kernel_id.clear();
}

} // namespace kpool::serve
