// kernel_leases: kpool serve's control calls about the kernels it holds, and its lease policy.
#include "serve/kernel_leases.hpp"

#include "protocol/control_replies.hpp"
#include "protocol/control_requests.hpp"
#include "serve/deadlines.hpp"

#include <cmath>
#include <csignal>

namespace kpool::serve {

using json = nlohmann::json;

kernel_leases::kernel_leases(control_service& daemons, std::chrono::seconds holder_lease)
    : m_daemons(daemons), m_holder_lease(holder_lease) {}

lease_terms kernel_leases::call_terms(std::optional<std::chrono::milliseconds> timeout) {
    if (!timeout) {
        return holder_terms();
    }
    return {std::ceil(std::chrono::duration<double>(*timeout).count()) + 60};
}

void kernel_leases::acquire(const protocol::acquire_args& args, acquired_fn done) {
    const std::chrono::milliseconds wait(
        args.timeout_ms.value_or(protocol::default_acquire_timeout.count()));
    m_daemons.control(
        protocol::requests::acquire(args), wait + control_margin,
        [this, pool = args.pool, done = std::move(done)](result<json> reply, std::size_t daemon) {
            if (!reply) {
                return done(reply.err(), [message = reply.err().message] {
                    return error_response(503, "unavailable", "no kpoold answered: " + message);
                });
            }
            auto acquired = protocol::read_acquire_reply(*reply);
            if (!acquired) {
                return done(acquired.err(), [this, refused = acquired.err(), pool] {
                    return acquire_refusal(refused, m_daemons.retry_after(pool));
                });
            }
            kernel_lease lease{daemon, acquired->kernel_id, {}};
            if (!acquired->connection) {
                const error why = acquired->connection.err();
                release(lease);
                return done(why, [why] {
                    return error_response(502, "daemon_error",
                                          "kpoold's connection info: " + why.message);
                });
            }
            lease.connection = std::move(*acquired->connection);
            done(std::move(lease), {});
        });
}

void kernel_leases::apply_context(const kernel_lease& lease, const std::string& cwd,
                                  const std::map<std::string, std::string>& env,
                                  bool memory_history, context_fn done) {
    protocol::context_args args{lease.kernel_id, std::nullopt, env, memory_history};
    if (!cwd.empty()) {
        args.cwd = cwd;
    }
    m_daemons.control_at(
        lease.daemon, protocol::requests::context(args), kernel_ready_timeout + control_margin,
        [done = std::move(done)](result<json> reply) {
            if (!reply) {
                return done(error_response(503, "unavailable",
                                           "kpoold did not apply cwd/env: " + reply.err().message),
                            false);
            }
            if (auto refused = protocol::refusal_of(*reply)) {
                return done(context_refusal(*refused), refused->code == errc::unknown_kernel);
            }
            done(std::nullopt, false);
        });
}

void kernel_leases::renew(const kernel_lease& lease, double lease_s,
                          std::function<void(bool)> done) {
    m_daemons.control_at(lease.daemon, protocol::requests::renew(lease.kernel_id, lease_s),
                         control_margin, [done = std::move(done)](result<json> reply) {
                             if (done) {
                                 done(reply && !protocol::refusal_of(*reply));
                             }
                         });
}

void kernel_leases::renew_when_due(const kernel_lease& lease, lease_watch& watch) {
    const auto now = std::chrono::steady_clock::now();
    if (now - watch.renewed >= m_holder_lease / 3) {
        watch.renewed = now;
        renew(lease, static_cast<double>(m_holder_lease.count()));
    }
}

void kernel_leases::poll(const kernel_lease& lease, std::function<void(result<json>)> done) {
    m_daemons.control_at(lease.daemon, protocol::requests::poll(lease.kernel_id), control_margin,
                         std::move(done));
}

bool kernel_leases::gone_after(lease_watch& watch, const result<json>& reply) {
    watch.unanswered_polls = reply ? 0 : watch.unanswered_polls + 1;
    if (!reply) {
        return watch.unanswered_polls >= 3;
    }
    auto polled = protocol::read_poll_reply(*reply);
    return !polled || !polled->alive; // refused: kpoold no longer knows it
}

void kernel_leases::interrupt(const kernel_lease& lease,
                              std::function<void(std::optional<std::string>)> done) {
    m_daemons.control_at(lease.daemon, protocol::requests::signal(lease.kernel_id, SIGINT),
                         control_margin, [done = std::move(done)](result<json> reply) {
                             if (!done) {
                                 return;
                             }
                             if (!reply) {
                                 return done(reply.err().message);
                             }
                             if (auto refused = protocol::refusal_of(*reply)) {
                                 return done(refused->message);
                             }
                             done(std::nullopt);
                         });
}

void kernel_leases::release(const kernel_lease& lease, std::function<void()> done) {
    m_daemons.control_at(lease.daemon, protocol::requests::release(lease.kernel_id), control_margin,
                         [done = std::move(done)](result<json>) {
                             if (done) {
                                 done();
                             }
                         });
}

} // namespace kpool::serve
