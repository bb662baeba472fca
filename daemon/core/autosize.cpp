// autosizer: exponentially weighted arrival rate and time to warm -> a target pool size.
#include "daemon/core/autosize.hpp"

#include <algorithm>
#include <cmath>

namespace kpool::daemon {
namespace {

double seconds_from(autosizer::clock::time_point a, autosizer::clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

// How much weight a new time-to-warm measurement gets.
constexpr double warm_weight = 0.2;

} // namespace

void autosizer::on_acquire(clock::time_point now) {
    // A decaying count of arrivals over its time constant is a rate: steady arrivals at r per
    // second converge to r.
    const double since = m_last_arrival ? std::max(0.0, seconds_from(*m_last_arrival, now)) : 0;
    m_fast.add(since);
    m_slow.add(since);
    m_last_arrival = now;
}

void autosizer::on_wait(clock::time_point now) {
    (void)now;
    m_target = std::min(m_target + 1, m_params.max);
    m_smaller_since.reset();
}

double autosizer::rate_per_s(clock::time_point now) const {
    if (!m_last_arrival) {
        return 0;
    }
    const double since = std::max(0.0, seconds_from(*m_last_arrival, now));
    return std::max(m_fast.per_s(since), m_slow.per_s(since));
}

void autosizer::on_time_to_warm(double seconds) {
    m_time_to_warm =
        m_time_to_warm < 0 ? seconds : m_time_to_warm + warm_weight * (seconds - m_time_to_warm);
}

int autosizer::wanted(clock::time_point now) const {
    const double ttw = m_time_to_warm < 0 ? m_params.initial_time_to_warm_s : m_time_to_warm;
    const double kernels = rate_per_s(now) * ttw * m_params.safety;
    // Rounded up, less a sliver: floating-point noise or a decayed rate's last trace of a
    // kernel asks for none.
    const int n = std::max(0, static_cast<int>(std::ceil(kernels - 0.05)));
    return std::clamp(n, m_params.min, m_params.max);
}

int autosizer::update(clock::time_point now) {
    const int want = wanted(now);
    if (want >= m_target) {
        m_target = want; // grow at once
        m_smaller_since.reset();
        return m_target;
    }
    if (!m_smaller_since) {
        m_smaller_since = now;
    } else if (seconds_from(*m_smaller_since, now) >= m_params.shrink_after_s) {
        m_target = want;
        m_smaller_since.reset();
    }
    return m_target;
}

std::optional<autosizer::clock::time_point> autosizer::next_check(clock::time_point now) const {
    if (m_smaller_since) {
        return *m_smaller_since + std::chrono::duration_cast<clock::duration>(
                                      std::chrono::duration<double>(m_params.shrink_after_s));
    }
    if (m_target > m_params.min) {
        // In silence nothing calls update(); look again now and then to notice the rate decay.
        return now + std::chrono::seconds(5);
    }
    return std::nullopt;
}

} // namespace kpool::daemon
