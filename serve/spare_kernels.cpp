// spare_kernels: acquire -> handshake -> ready -> taken by a request, or released.
#include "serve/spare_kernels.hpp"

#include "loop/logging.hpp"
#include "serve/deadlines.hpp"
#include "serve/request_services.hpp"

#include <algorithm>

namespace kpool::serve {

using json = nlohmann::json;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {
constexpr auto check_every = 1000ms;
// After an acquire found no warm kernel (or no daemon): the pool is busy; ask again later.
constexpr auto retry_after_refusal = 1000ms;
} // namespace

spare_kernels::spare_kernels(request_services& owner, std::size_t per_pool)
    : m_owner(owner), m_per_pool(per_pool), m_check(owner.loop()) {
    if (m_per_pool > 0) {
        m_check.start(
            check_every, [this] { check(); }, check_every);
        m_check.unref();
    }
}

spare_kernels::~spare_kernels() = default;

std::optional<spare_kernels::spare> spare_kernels::take(const std::string& pool) {
    auto it = m_pools.find(pool);
    if (it == m_pools.end() || it->second.ready.empty()) {
        return std::nullopt;
    }
    spare s = std::move(it->second.ready.front().kernel);
    it->second.ready.erase(it->second.ready.begin());
    update_gauge();
    return s;
}

void spare_kernels::used(const std::string& pool) {
    if (m_per_pool > 0 && !m_stopping) {
        m_pools.try_emplace(pool);
    }
}

void spare_kernels::top_up() {
    if (m_stopping) {
        return;
    }
    for (auto& [name, p] : m_pools) {
        fill(name, p);
    }
}

void spare_kernels::fill(const std::string& name, pool_spares& p) {
    if (p.acquiring || p.ready.size() + p.preparing.size() >= m_per_pool ||
        steady::now() < p.next_try) {
        return;
    }
    p.acquiring = true;
    ++m_in_flight;
    protocol::acquire_args request;
    request.pool = name;
    request.timeout_ms = 0; // a warm kernel or nothing: never in a request's way
    request.lease_s = static_cast<double>(m_owner.leases().holder_lease().count());
    m_owner.leases().acquire(
        request, [this, name](result<kernel_lease> lease, const kernel_leases::refusal_fn&) {
            --m_in_flight;
            on_acquired(name, std::move(lease));
        });
}

void spare_kernels::on_acquired(const std::string& name, result<kernel_lease> lease) {
    pool_spares& p = m_pools[name];
    p.acquiring = false;
    if (!lease) {
        if (lease.err().code == errc::unknown_pool) {
            // Not served (now): spares again once a request has run on it (used()).
            if (p.ready.empty() && p.preparing.empty()) {
                m_pools.erase(name);
            }
        } else {
            p.next_try = steady::now() + retry_after_refusal;
        }
        return finish_release_if_done();
    }
    if (m_stopping) {
        release(*lease);
        return finish_release_if_done();
    }
    const std::string id = lease->kernel_id;
    const protocol::connection_info info = lease->connection;
    p.preparing.push_back(
        {std::move(*lease),
         std::make_unique<kernel_channels>(m_owner.loop(), m_owner.zmq(), info, true, nullptr)});
    p.preparing.back().channels->when_subscribed(
        kernel_ready_timeout,
        [this, name, id](result<json> subscribed) { on_prepared(name, id, subscribed.ok()); });
}

void spare_kernels::on_prepared(const std::string& name, const std::string& kernel_id, bool ok) {
    pool_spares& p = m_pools[name];
    auto it = std::find_if(p.preparing.begin(), p.preparing.end(),
                           [&](const spare& s) { return s.lease.kernel_id == kernel_id; });
    if (it == p.preparing.end()) {
        return;
    }
    spare s = std::move(*it);
    p.preparing.erase(it);
    if (!ok || m_stopping) {
        if (!ok) {
            loop::logger("serve")->warn("spare kernel {} did not answer its handshake: released",
                                        kernel_id);
        }
        release(s.lease);
        m_owner.retire(std::move(s.channels)); // its callback is on the stack
        return finish_release_if_done();
    }
    p.ready.push_back({std::move(s), {}});
    update_gauge();
}

void spare_kernels::check() {
    if (m_stopping) {
        return;
    }
    for (auto& [name, p] : m_pools) {
        for (held& h : p.ready) {
            m_owner.leases().renew_when_due(h.kernel.lease, h.watch);
            m_owner.leases().poll(
                h.kernel.lease,
                [this, pool = name, id = h.kernel.lease.kernel_id](result<json> reply) {
                    auto pit = m_pools.find(pool);
                    if (pit == m_pools.end()) {
                        return;
                    }
                    auto& ready = pit->second.ready;
                    auto it = std::find_if(ready.begin(), ready.end(), [&](const held& x) {
                        return x.kernel.lease.kernel_id == id;
                    });
                    if (it == ready.end()) {
                        return; // taken meanwhile
                    }
                    if (kernel_leases::gone_after(it->watch, reply)) {
                        loop::logger("serve")->info("spare kernel {} is gone: replaced", id);
                        drop(pool, id, reply.ok());
                    }
                });
        }
    }
    top_up();
}

void spare_kernels::drop(const std::string& name, const std::string& kernel_id, bool release_it) {
    auto& ready = m_pools[name].ready;
    auto it = std::find_if(ready.begin(), ready.end(),
                           [&](const held& h) { return h.kernel.lease.kernel_id == kernel_id; });
    if (it == ready.end()) {
        return;
    }
    if (release_it) {
        release(it->kernel.lease);
    }
    m_owner.retire(std::move(it->kernel.channels));
    ready.erase(it);
    update_gauge();
}

void spare_kernels::release(const kernel_lease& lease) {
    ++m_in_flight;
    m_owner.leases().release(lease, [this] {
        --m_in_flight;
        finish_release_if_done();
    });
}

void spare_kernels::release_all(std::function<void()> done) {
    m_stopping = true;
    m_check.stop();
    m_on_released = std::move(done);
    for (auto& [name, p] : m_pools) {
        for (held& h : p.ready) {
            release(h.kernel.lease);
            m_owner.retire(std::move(h.kernel.channels));
        }
        p.ready.clear();
        // Those being prepared are released when their handshake ends (on_prepared).
    }
    update_gauge();
    finish_release_if_done();
}

void spare_kernels::finish_release_if_done() {
    if (!m_stopping || !m_on_released || m_in_flight > 0) {
        return;
    }
    for (const auto& [name, p] : m_pools) {
        if (p.acquiring || !p.preparing.empty()) {
            return;
        }
    }
    auto done = std::move(m_on_released);
    m_on_released = nullptr;
    done();
}

std::size_t spare_kernels::ready() const {
    std::size_t n = 0;
    for (const auto& [name, p] : m_pools) {
        n += p.ready.size();
    }
    return n;
}

void spare_kernels::update_gauge() {
    m_owner.metrics().spare_kernels().Set(static_cast<double>(ready()));
}

} // namespace kpool::serve
