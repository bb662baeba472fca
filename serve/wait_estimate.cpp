// wait_estimate: a refused caller's turn from how fast the kernels requests hold come round.
#include "serve/wait_estimate.hpp"

#include <algorithm>
#include <cmath>
#include <vector>

namespace kpool::serve {
namespace {

constexpr double min_retry_s = 1;
constexpr double max_retry_s = 60;

} // namespace

void wait_estimate::took(clock::time_point now) {
    m_holding.insert(now);
    while (!m_peaks.empty() && (now - m_peaks.front().first > peak_window ||
                                m_peaks.front().second <= m_holding.size())) {
        m_peaks.pop_front(); // too old, or no higher than now: never the peak again before this one
    }
    // Highest first: each entry is higher than those after it, so the front is the peak.
    while (!m_peaks.empty() && m_peaks.back().second <= m_holding.size()) {
        m_peaks.pop_back();
    }
    m_peaks.emplace_back(now, m_holding.size());
}

void wait_estimate::returned(clock::time_point taken, clock::time_point now, bool used) {
    if (auto it = m_holding.find(taken); it != m_holding.end()) {
        m_holding.erase(it);
    }
    if (!used) {
        return;
    }
    m_holds.push_back(std::chrono::duration<double>(now - taken).count());
    if (m_holds.size() > kept_holds) {
        m_holds.pop_front();
    }
}

std::optional<double> wait_estimate::turnover(clock::time_point now, double warm_s) const {
    double hold = 0;
    if (!m_holds.empty()) {
        std::vector<double> sorted(m_holds.begin(), m_holds.end());
        std::nth_element(sorted.begin(), sorted.begin() + static_cast<long>(sorted.size() / 2),
                         sorted.end());
        hold = sorted[sorted.size() / 2];
    }
    if (!m_holding.empty()) {
        // Before the first return (or if requests got slower), the oldest holder's age is a
        // lower bound of how long a request holds its kernel.
        hold = std::max(hold, std::chrono::duration<double>(now - *m_holding.begin()).count());
    }
    if (hold <= 0) {
        return std::nullopt;
    }
    std::size_t peak = m_holding.size();
    for (const auto& [at, count] : m_peaks) {
        if (now - at <= peak_window) {
            peak = std::max(peak, count);
        }
    }
    const double held = static_cast<double>(std::max<std::size_t>(peak, 1));
    return held / (hold + std::max(warm_s, 0.0));
}

std::optional<double> wait_estimate::expected_wait(clock::time_point now, double waiting,
                                                   double warm_s, bool promised) {
    while (!m_promised.empty() && m_promised.front() <= now) {
        m_promised.pop_front();
    }
    const auto rate = turnover(now, warm_s);
    if (!rate) {
        return std::nullopt;
    }
    // Its place: those waiting inside, those told to come back later, then itself.
    return (waiting + (promised ? static_cast<double>(m_promised.size()) : 0) + 1) / *rate;
}

int wait_estimate::refused(clock::time_point now, double waiting, double warm_s,
                           double fallback_s) {
    double seconds = fallback_s;
    if (const auto wait = expected_wait(now, waiting, warm_s)) {
        seconds = std::max(seconds, *wait);
    }
    seconds = std::clamp(std::ceil(seconds), min_retry_s, max_retry_s);
    const auto back =
        now + std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(seconds));
    // Kept in order, so that the front is the next to fall due.
    m_promised.insert(std::upper_bound(m_promised.begin(), m_promised.end(), back), back);
    return static_cast<int>(seconds);
}

} // namespace kpool::serve
