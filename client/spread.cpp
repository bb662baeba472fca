// spread: the choice of kpoold for an acquire, and failover.
#include "client/spread.hpp"

#include <algorithm>

namespace kpool::client {

void spread::learn_status(const std::string& endpoint,
                          const std::vector<protocol::pool_summary>& pools, clock::time_point now) {
    view& v = m_views[endpoint];
    v.warm.clear();
    for (const protocol::pool_summary& p : pools) {
        if (!p.removed && !p.drained) {
            v.warm[p.name] = p.warm;
        }
    }
    v.learnt = now;
    v.down_until.reset();
}

void spread::learn_acquired(const std::string& endpoint, const std::string& pool, int pool_warm) {
    view& v = m_views[endpoint];
    v.warm[pool] = pool_warm;
    v.down_until.reset();
}

void spread::learn_refused(const std::string& endpoint, const std::string& pool) {
    m_views[endpoint].warm[pool] = 0;
}

void spread::mark_down(const std::string& endpoint, clock::time_point now) {
    m_views[endpoint].down_until = now + down_for;
}

bool spread::is_down(const std::string& endpoint, clock::time_point now) const {
    auto it = m_views.find(endpoint);
    return it != m_views.end() && it->second.down_until && *it->second.down_until > now;
}

bool spread::stale(const std::string& endpoint, clock::time_point now) const {
    if (is_down(endpoint, now)) {
        return false;
    }
    auto it = m_views.find(endpoint);
    return it == m_views.end() || !it->second.learnt || now - *it->second.learnt >= view_ttl;
}

std::vector<std::string> spread::order(const std::string& pool,
                                       const std::vector<std::string>& endpoints,
                                       clock::time_point now) {
    std::vector<std::string> up;
    std::vector<std::string> down;
    bool fresh = true;
    for (const auto& e : endpoints) {
        if (is_down(e, now)) {
            down.push_back(e);
        } else {
            up.push_back(e);
            fresh = fresh && !stale(e, now);
        }
    }
    std::shuffle(up.begin(), up.end(), m_random);
    std::shuffle(down.begin(), down.end(), m_random);
    auto warm = [&](const std::string& e) {
        const auto& w = m_views[e].warm;
        auto it = w.find(pool);
        return it == w.end() ? 0 : it->second;
    };
    auto by_warm = [&](const std::string& a, const std::string& b) { return warm(a) > warm(b); };
    if (!fresh && up.size() >= 2) {
        // Power of two choices: the better of two picked at random goes first.
        if (warm(up[1]) > warm(up[0])) {
            std::swap(up[0], up[1]);
        }
        std::stable_sort(up.begin() + 1, up.end(), by_warm);
    } else {
        std::stable_sort(up.begin(), up.end(), by_warm); // stable: the shuffle breaks ties
    }
    up.insert(up.end(), down.begin(), down.end());
    return up;
}

bool spread::fails_over(const error& refusal) {
    switch (refusal.code) {
    case errc::capacity:
    case errc::unavailable:
    case errc::unknown_pool:
    case errc::shutting_down: return true;
    default: return false;
    }
}

std::int64_t spread::attempt_timeout_ms(std::optional<std::int64_t> asked,
                                        std::chrono::milliseconds left) {
    const std::int64_t room = std::max<std::int64_t>(0, (left - reply_margin).count());
    return asked ? std::min(*asked, room) : room;
}

} // namespace kpool::client
