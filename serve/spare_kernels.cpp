// spare_kernels: obtained -> ready (watched) -> taken by a request, or released.
#include "serve/spare_kernels.hpp"

#include "loop/logging.hpp"
#include "serve/request_services.hpp"

#include <algorithm>

namespace kpool::serve {

using json = nlohmann::json;
using namespace std::chrono_literals;
using steady = std::chrono::steady_clock;

namespace {
// After an acquire found no warm kernel (or no daemon): the pool is busy; ask again later.
constexpr auto retry_after_refusal = 1000ms;
} // namespace

spare_kernels::spare_kernels(request_services& owner, std::size_t per_pool)
    : m_owner(owner), m_per_pool(per_pool) {}

spare_kernels::~spare_kernels() = default;

std::optional<spare_kernels::spare> spare_kernels::take(const kernel_order& order) {
    auto it = m_pools.find(order.pool);
    if (it == m_pools.end()) {
        return std::nullopt;
    }
    pool_spares& p = it->second;
    learn(p, order);
    if (p.ready.empty()) {
        return std::nullopt;
    }
    const prepared asked{order.cwd, order.memory_history};
    // One prepared as asked; else one the order's context can still be applied to: history
    // never moves back to the file, and a cwd applied is the order's own (a sandboxed kernel's
    // is chosen once; a kernel's own first cwd is not known here).
    auto chosen = std::find_if(p.ready.begin(), p.ready.end(),
                               [&](const held& h) { return h.with == asked; });
    if (chosen == p.ready.end()) {
        chosen = std::find_if(p.ready.begin(), p.ready.end(), [&](const held& h) {
            return (!h.with.memory_history || order.memory_history) &&
                   (h.with.cwd.empty() || h.with.cwd == order.cwd);
        });
    }
    if (chosen == p.ready.end()) {
        // Prepared for what requests asked before: one goes, and the next top-up prepares for
        // what they ask now.
        const std::string stale = p.ready.front().kernel.lease.kernel_id; // drop erases it
        drop(order.pool, stale, true);
        return std::nullopt;
    }
    spare s = std::move(chosen->kernel);
    p.ready.erase(chosen);
    update_gauge();
    return s;
}

void spare_kernels::used(const kernel_order& order) {
    if (m_per_pool > 0 && !m_stopping) {
        auto [it, added] = m_pools.try_emplace(order.pool);
        if (added) {
            learn(it->second, order);
        }
    }
}

void spare_kernels::learn(pool_spares& p, const kernel_order& order) {
    p.before_last = p.last;
    p.last = order.env.empty() ? std::optional<prepared>(prepared{order.cwd, order.memory_history})
                               : std::nullopt;
}

spare_kernels::prepared spare_kernels::to_prepare(const pool_spares& p) {
    // Two alike in a row: a steady client (one notebook served again and again). Requests
    // that alternate (a gateway's starts and /v1 runs on one pool) keep plain spares, which
    // take either's context.
    if (p.last && p.before_last && *p.last == *p.before_last) {
        return *p.last;
    }
    return {};
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
    if (p.obtaining || p.ready.size() >= m_per_pool || steady::now() < p.next_try) {
        return;
    }
    p.obtaining = true;
    ++m_in_flight;
    const prepared with = to_prepare(p);
    kernel_order order;
    order.pool = name;
    order.cwd = with.cwd;
    order.memory_history = with.memory_history;
    order.lease = kernel_leases::holder_terms();
    order.wait = 0ms; // a warm kernel or nothing: never in a request's way
    order.for_caller = false;
    order.all_ports = true; // a gateway kernel may be made of it
    m_owner.held().obtain(order, [this, name, with](obtained kernel) {
        --m_in_flight;
        on_obtained(name, with, std::move(kernel));
    });
}

void spare_kernels::on_obtained(const std::string& name, const prepared& with, obtained kernel) {
    pool_spares& p = m_pools[name];
    p.obtaining = false;
    if (auto* no = std::get_if<refusal>(&kernel)) {
        if (no->code == errc::unknown_pool) {
            // Not served (now): spares again once a request has run on it (used()).
            if (p.ready.empty()) {
                m_pools.erase(name);
            }
        } else if (no->code == errc::bad_request && !(with == prepared{})) {
            // What it was prepared with no longer works (its folder removed, say): plain spares
            // until requests agree again, rather than a kernel lost every second. The next may
            // come at once: the pool was not busy, the preparation failed.
            p.last.reset();
            p.before_last.reset();
        } else {
            if (no->answer.status == 502) {
                loop::logger("serve")->warn("a spare kernel of pool {} did not answer its "
                                            "handshake: released",
                                            name);
            }
            p.next_try = steady::now() + retry_after_refusal;
        }
        return finish_release_if_done();
    }
    connected_kernel& k = std::get<connected_kernel>(kernel);
    if (m_stopping) {
        release(k.lease);
        m_owner.retire(std::move(k.channels)); // its handshake's callback is on the stack
        return finish_release_if_done();
    }
    const std::string id = k.lease.kernel_id;
    kernel_watch watch = m_owner.held().watch(
        k.lease, kernel_leases::holder_terms(),
        {.on_gone = [this, name, id](const kernel_gone& gone) {
            loop::logger("serve")->info("spare kernel {} is gone: replaced", id);
            drop(name, id, gone.daemon_answered);
        }});
    p.ready.push_back({std::move(k), std::move(watch), with});
    update_gauge();
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
    m_on_released = std::move(done);
    for (auto& [name, p] : m_pools) {
        for (held& h : p.ready) {
            release(h.kernel.lease);
            m_owner.retire(std::move(h.kernel.channels));
        }
        p.ready.clear();
        // Those being obtained are released when their obtain ends (on_obtained).
    }
    update_gauge();
    finish_release_if_done();
}

void spare_kernels::finish_release_if_done() {
    if (!m_stopping || !m_on_released || m_in_flight > 0) {
        return;
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
