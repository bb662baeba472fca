// pool: who gets which kernel, what to start, what to stop.
#include "daemon/core/pool.hpp"

#include "daemon/core/backoff.hpp"
#include "loop/logging.hpp"

#include <algorithm>
#include <cmath>

namespace kpool::daemon {
namespace {

using namespace std::chrono_literals;

// After a start refused for want of resources, when to try again (exits also retry at once).
constexpr auto resource_retry = 1000ms;

double seconds_between(clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

clock::duration seconds(double s) {
    return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s));
}

} // namespace

void recent_samples::add(double v) {
    if (m_values.size() < capacity) {
        m_values.push_back(v);
    } else {
        m_values[m_next] = v;
    }
    m_next = (m_next + 1) % capacity;
}

std::optional<double> recent_samples::percentile(double p) const {
    if (m_values.empty()) {
        return std::nullopt;
    }
    std::vector<double> sorted = m_values;
    const auto rank =
        static_cast<std::size_t>(std::lround(p / 100.0 * static_cast<double>(sorted.size() - 1)));
    std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(rank), sorted.end());
    return sorted[rank];
}

const char* to_string(kernel_state s) noexcept {
    switch (s) {
    case kernel_state::starting: return "starting";
    case kernel_state::warm: return "warm";
    case kernel_state::leased: return "leased";
    case kernel_state::stopping: return "stopping";
    }
    return "unknown";
}

namespace {

std::optional<autosizer> autosizer_for(const config::pool_config& cfg) {
    if (!cfg.auto_size) {
        return std::nullopt;
    }
    autosizer::params p;
    p.min = cfg.min_size;
    p.max = cfg.max_size;
    return autosizer(p);
}

} // namespace

pool::pool(config::pool_config cfg, kernel_budget& budget, kernel_driver& driver,
           waiter_sink& waiters, std::function<std::string()> make_id)
    : m_cfg(std::move(cfg)), m_budget(budget), m_driver(driver), m_waiter_sink(waiters),
      m_make_id(std::move(make_id)), m_auto(autosizer_for(m_cfg)) {}

void pool::autosize(clock::time_point now) {
    if (!m_auto || m_shutting_down || m_retired || m_drained) {
        return;
    }
    const int before = m_cfg.size;
    const int target = m_auto->update(now);
    m_auto_check = m_auto->next_check(now);
    if (target == before) {
        return;
    }
    loop::logger("pool")->info(
        "pool {} auto size {} -> {} (arrivals {:.2f}/s, time to warm {:.2f} s)", m_cfg.name, before,
        target, m_auto->rate_per_s(now), m_auto->time_to_warm_s());
    m_cfg.size = target;
    if (target < before) {
        stop_surplus(target + static_cast<int>(m_waiters.size()), now);
    }
}

int pool::count(kernel_state s) const {
    return static_cast<int>(std::count_if(m_kernels.begin(), m_kernels.end(),
                                          [s](const auto& kv) { return kv.second.state == s; }));
}

void pool::set_state(kernel_entry& k, kernel_state s, clock::time_point now) {
    const bool was_warm = k.state == kernel_state::warm;
    const bool is_warm = s == kernel_state::warm;
    k.state = s;
    k.state_since = now;
    if (was_warm != is_warm) {
        m_driver.watch_kernel(k.id, is_warm);
    }
}

kernel_entry* pool::oldest_warm() {
    kernel_entry* best = nullptr;
    for (auto& [id, k] : m_kernels) {
        if (k.state == kernel_state::warm && !k.failed &&
            (best == nullptr || k.state_since < best->state_since)) {
            best = &k;
        }
    }
    return best;
}

kernel_entry& pool::lease(kernel_entry& k, std::optional<double> lease_s, clock::time_point now) {
    set_state(k, kernel_state::leased, now);
    const double lease = lease_s.value_or(m_cfg.lease_s);
    k.lease_deadline = lease > 0 ? std::optional(now + seconds(lease)) : std::nullopt;
    ++m_counters.acquired;
    return k;
}

acquire_outcome pool::acquire(waiter_id who, std::chrono::milliseconds timeout,
                              std::optional<double> lease_s, clock::time_point now) {
    if (m_shutting_down) {
        return error{errc::shutting_down, "the daemon is shutting down"};
    }
    if (m_retired) {
        return error{errc::unknown_pool, "pool '" + m_cfg.name + "' was removed from the config"};
    }
    if (m_drained) {
        return error{errc::unavailable,
                     "pool '" + m_cfg.name + "' is drained (resize it to serve again)"};
    }
    if (m_auto) {
        m_auto->on_acquire(now);
        autosize(now); // a larger target is filled by the refill that follows every acquire
    }
    if (kernel_entry* k = oldest_warm()) {
        ++m_counters.served_warm;
        // No refill here: the caller replies first and refills after, so starting a
        // replacement (a fork) never lands on this request's latency.
        return &lease(*k, lease_s, now);
    }
    if (failing()) {
        return unavailable_error(now);
    }
    if (count(kernel_state::starting) == 0 && !m_budget.available() && m_budget.stopping == 0) {
        return error{errc::capacity, "no warm kernel in pool '" + m_cfg.name +
                                         "' and max_kernels (" + std::to_string(m_budget.max) +
                                         ") kernels already exist"};
    }
    if (count(kernel_state::starting) == 0 && !m_resource_shortage.empty()) {
        return error{errc::capacity, "no warm kernel in pool '" + m_cfg.name +
                                         "' and none can start now: " + m_resource_shortage};
    }
    if (timeout.count() == 0) {
        ++m_counters.timed_out;
        return error{errc::timeout, "no warm kernel in pool '" + m_cfg.name + "'"};
    }
    if (m_auto) {
        m_auto->on_wait(now);
        autosize(now);
    }
    m_waiters.push_back({who, now + timeout, lease_s});
    // The kernels already starting are what this acquire waits for.
    for (auto& [id, k] : m_kernels) {
        if (k.state == kernel_state::starting && !k.awaited) {
            k.awaited = true;
            m_driver.hurry(id);
        }
    }
    refill(now);
    return acquire_queued{};
}

void pool::return_unseen(const std::string& id, clock::time_point now) {
    auto it = m_kernels.find(id);
    if (it == m_kernels.end() || it->second.state != kernel_state::leased) {
        return;
    }
    --m_counters.acquired;
    set_state(it->second, kernel_state::warm, clock::time_point{}); // first in line again
    it->second.lease_deadline.reset();
    loop::logger("pool")->info(
        "kernel back to warm id={} pool={}: the client left before the reply", id, m_cfg.name);
    serve_waiters(now);
}

status pool::release(const std::string& id, clock::time_point now) {
    auto it = m_kernels.find(id);
    if (it == m_kernels.end() || it->second.state != kernel_state::leased) {
        return error{errc::unknown_kernel,
                     "no leased kernel '" + id + "' in pool '" + m_cfg.name + "'"};
    }
    loop::logger("pool")->debug("kernel released id={} pool={}", id, m_cfg.name);
    stop(it->second, now);
    return ok_status();
}

status pool::renew(const std::string& id, double lease_s, clock::time_point now) {
    auto it = m_kernels.find(id);
    if (it == m_kernels.end() || it->second.state != kernel_state::leased) {
        return error{errc::unknown_kernel,
                     "no leased kernel '" + id + "' in pool '" + m_cfg.name + "'"};
    }
    it->second.lease_deadline = now + seconds(lease_s);
    return ok_status();
}

void pool::stop(kernel_entry& k, clock::time_point now) {
    if (k.state == kernel_state::stopping) {
        return;
    }
    set_state(k, kernel_state::stopping, now);
    ++m_budget.stopping;
    k.lease_deadline.reset();
    m_driver.stop_kernel(k.id);
}

void pool::on_spawned(const std::string& id, int pid) {
    if (auto it = m_kernels.find(id); it != m_kernels.end()) {
        it->second.pid = pid;
    }
}

void pool::on_warm(const std::string& id, const protocol::connection_info& info,
                   const std::string& connection_file, clock::time_point now) {
    auto it = m_kernels.find(id);
    if (it == m_kernels.end() || it->second.state != kernel_state::starting) {
        return;
    }
    kernel_entry& k = it->second;
    k.connection = info;
    k.connection_file = connection_file;
    set_state(k, kernel_state::warm, now);
    m_warm_seconds.add(seconds_between(k.created, now));
    if (m_auto) {
        m_auto->on_time_to_warm(seconds_between(k.created, now));
    }
    m_consecutive_failures = 0;
    m_backoff_until.reset();
    loop::logger("pool")->debug("kernel warm id={} pool={} pid={} startup_ms={:.0f}", id,
                                m_cfg.name, k.pid, seconds_between(k.created, now) * 1000);
    serve_waiters(now);
}

void pool::serve_waiters(clock::time_point now) {
    while (!m_waiters.empty()) {
        kernel_entry* k = oldest_warm();
        if (k == nullptr) {
            break;
        }
        const queued_acquire w = m_waiters.front();
        m_waiters.pop_front();
        lease(*k, w.lease_s, now);
        ++m_counters.waited;
        if (!m_waiter_sink.granted(w.id, *k)) {
            --m_counters.waited;
            --m_counters.acquired;
            set_state(*k, kernel_state::warm, clock::time_point{});
            k->lease_deadline.reset();
        }
    }
    refill(now);
}

void pool::record_failure(const std::string& reason, clock::time_point now) {
    m_counters.last_error = reason;
    ++m_consecutive_failures;
    // Exponentially, so a broken kernelspec cannot fork-storm.
    const auto delay = backoff_delay(m_consecutive_failures);
    m_backoff_until = now + delay;
    loop::logger("pool")->error("pool {} kernel failure #{} ({}); next start in {:.1f} s",
                                m_cfg.name, m_consecutive_failures, reason,
                                std::chrono::duration<double>(delay).count());
    if (failing()) {
        fail_waiters(unavailable_error(now)); // nobody should wait out a timeout for these
    }
}

error pool::unavailable_error(clock::time_point now) const {
    std::string retry;
    if (m_backoff_until && *m_backoff_until > now) {
        retry = fmt::format("; next attempt in {:.1f} s", seconds_between(now, *m_backoff_until));
    }
    return error{
        errc::unavailable,
        fmt::format("pool '{}' cannot start kernels ({} failures in a row{}); last error: {}",
                    m_cfg.name, m_consecutive_failures, retry, m_counters.last_error)};
}

void pool::on_start_failed(const std::string& id, const std::string& reason,
                           clock::time_point now) {
    auto it = m_kernels.find(id);
    if (it == m_kernels.end() || it->second.failed) {
        return;
    }
    it->second.failed = true;
    ++m_counters.spawn_failures;
    record_failure("kernel " + id + " failed to start: " + reason, now);
    stop(it->second, now);
}

void pool::on_exited(const std::string& id, const std::string& reason, clock::time_point now) {
    auto it = m_kernels.find(id);
    if (it == m_kernels.end()) {
        return;
    }
    kernel_entry& k = it->second;
    if (!k.failed && k.state == kernel_state::starting) {
        ++m_counters.spawn_failures;
        record_failure("kernel " + id + " exited while starting: " + reason, now);
    } else if (!k.failed && k.state == kernel_state::warm) {
        ++m_counters.died_warm;
        m_counters.last_error = "warm kernel " + id + " died: " + reason;
        loop::logger("pool")->warn("{}", m_counters.last_error);
    } else if (k.state == kernel_state::leased) {
        loop::logger("pool")->info("leased kernel {} exited: {}", id, reason);
    }
    if (k.state == kernel_state::warm) {
        m_driver.watch_kernel(id, false);
    }
    if (k.state == kernel_state::stopping) {
        --m_budget.stopping;
    }
    m_kernels.erase(it);
    --m_budget.used;
    refill(now);
}

void pool::on_unresponsive(const std::string& id, const std::string& reason,
                           clock::time_point now) {
    auto it = m_kernels.find(id);
    if (it == m_kernels.end() || it->second.state != kernel_state::warm) {
        return;
    }
    kernel_entry& k = it->second;
    k.failed = true; // its exit is not counted again
    ++m_counters.hung_warm;
    m_counters.last_error = "warm kernel " + id + " stopped answering: " + reason;
    loop::logger("pool")->warn("{}; replacing it", m_counters.last_error);
    stop(k, now);
    refill(now);
}

void pool::expire(clock::time_point now) {
    if (m_auto_check && *m_auto_check <= now) {
        autosize(now);
    }
    while (!m_waiters.empty()) {
        // Deadlines are not in queue order (timeouts differ), so scan.
        auto due = std::find_if(m_waiters.begin(), m_waiters.end(),
                                [now](const queued_acquire& w) { return w.deadline <= now; });
        if (due == m_waiters.end()) {
            break;
        }
        const waiter_id id = due->id;
        m_waiters.erase(due);
        ++m_counters.timed_out;
        m_waiter_sink.failed(
            id, {errc::timeout, "no kernel in pool '" + m_cfg.name + "' became warm in time"});
    }
    for (auto& [id, k] : m_kernels) {
        if (k.state == kernel_state::leased && k.lease_deadline && *k.lease_deadline <= now) {
            ++m_counters.leases_expired;
            loop::logger("pool")->info("lease expired id={} pool={}", id, m_cfg.name);
            stop(k, now);
        }
    }
    refill(now);
}

std::optional<clock::time_point> pool::next_deadline() const {
    std::optional<clock::time_point> next;
    auto consider = [&next](clock::time_point t) {
        if (!next || t < *next) {
            next = t;
        }
    };
    for (const queued_acquire& w : m_waiters) {
        consider(w.deadline);
    }
    for (const auto& [id, k] : m_kernels) {
        if (k.state == kernel_state::leased && k.lease_deadline) {
            consider(*k.lease_deadline);
        }
    }
    if (m_backoff_until && !m_shutting_down) {
        consider(*m_backoff_until);
    }
    if (m_auto_check && !m_shutting_down) {
        consider(*m_auto_check);
    }
    return next;
}

void pool::refill(clock::time_point now) {
    if (m_shutting_down || m_retired || (m_backoff_until && now < *m_backoff_until)) {
        return;
    }
    m_backoff_until.reset(); // over; m_consecutive_failures still sets the next one's length
    int starting = count(kernel_state::starting);
    const int wanted = m_cfg.size + static_cast<int>(m_waiters.size());
    int have = count(kernel_state::warm) + starting;
    while (have < wanted && starting < m_cfg.max_starting && m_budget.available()) {
        const std::string id = m_make_id();
        kernel_entry k;
        k.id = id;
        k.pool = m_cfg.name;
        k.created = now;
        k.state_since = now;
        k.awaited = !m_waiters.empty();
        m_kernels.emplace(id, std::move(k));
        ++m_budget.used;
        if (auto st = m_driver.start_kernel(*this, id, !m_waiters.empty()); !st) {
            m_kernels.erase(id);
            --m_budget.used;
            if (st.err().code == errc::capacity) {
                // Out of resources: try again shortly, or as soon as a kernel exits.
                if (m_resource_shortage.empty()) {
                    loop::logger("pool")->warn("pool {} cannot start a kernel: {}", m_cfg.name,
                                               st.err().message);
                }
                m_resource_shortage = st.err().message;
                m_backoff_until = now + resource_retry;
                if (starting == 0) {
                    fail_waiters({errc::capacity, "no kernel can start in pool '" + m_cfg.name +
                                                      "' now: " + m_resource_shortage});
                }
                return;
            }
            ++m_counters.spawn_failures;
            record_failure(st.err().message, now);
            return;
        }
        m_resource_shortage.clear();
        ++starting;
        ++have;
    }
}

void pool::fail_waiters(const error& err) {
    while (!m_waiters.empty()) {
        const waiter_id id = m_waiters.front().id;
        m_waiters.pop_front();
        m_waiter_sink.failed(id, err);
    }
}

void pool::shut_down(clock::time_point now) {
    m_shutting_down = true;
    m_backoff_until.reset();
    fail_waiters({errc::shutting_down, "the daemon is shutting down"});
    for (auto& [id, k] : m_kernels) {
        stop(k, now);
    }
}

void pool::stop_surplus(int keep, clock::time_point now) {
    for (kernel_state victim : {kernel_state::starting, kernel_state::warm}) {
        for (auto& [id, k] : m_kernels) {
            if (count(kernel_state::warm) + count(kernel_state::starting) <= keep) {
                return;
            }
            if (k.state == victim) {
                stop(k, now);
            }
        }
    }
}

void pool::reconfigure(config::pool_config cfg, bool replace_warm, clock::time_point now) {
    loop::logger("pool")->info("pool {} reconfigured: size {} -> {}{}", m_cfg.name, m_cfg.size,
                               cfg.size, replace_warm ? "; warm kernels replaced" : "");
    m_cfg = std::move(cfg);
    m_auto = autosizer_for(m_cfg);
    m_auto_check.reset();
    m_drained = false;
    // A reload is the operator asking to try again (say, after fixing a kernelspec): a fresh
    // start, without the backoff earned before.
    m_consecutive_failures = 0;
    m_backoff_until.reset();
    stop_surplus(replace_warm ? 0 : m_cfg.size + static_cast<int>(m_waiters.size()), now);
    refill(now);
}

void pool::resize(int size, clock::time_point now) {
    loop::logger("pool")->info("pool {} resized: {} -> {}{}", m_cfg.name, m_cfg.size, size,
                               m_auto ? " (no longer auto-sized, until the next reload)" : "");
    m_auto.reset();
    m_auto_check.reset();
    m_cfg.size = size;
    m_drained = false;
    stop_surplus(m_cfg.size + static_cast<int>(m_waiters.size()), now);
    refill(now);
}

void pool::replace_unleased(clock::time_point now) {
    loop::logger("pool")->info("pool {}: unleased kernels replaced", m_cfg.name);
    stop_surplus(0, now);
    refill(now);
}

void pool::drain(clock::time_point now) {
    loop::logger("pool")->info("pool {} drained", m_cfg.name);
    m_cfg.size = 0;
    m_drained = true;
    fail_waiters({errc::unavailable, "pool '" + m_cfg.name + "' was drained"});
    stop_surplus(0, now);
}

void pool::retire(clock::time_point now) {
    loop::logger("pool")->info("pool {} removed from the config; {} leased kernel(s) run on",
                               m_cfg.name, count(kernel_state::leased));
    m_retired = true;
    fail_waiters({errc::unknown_pool, "pool '" + m_cfg.name + "' was removed from the config"});
    stop_surplus(0, now);
}

} // namespace kpool::daemon
