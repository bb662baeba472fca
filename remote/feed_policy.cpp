// The feed policy's rules (remote/feed_policy.hpp); python/kpool/feed_policy.py mirrors them.
#include "remote/feed_policy.hpp"

#include <algorithm>
#include <cmath>

namespace kpool::remote {
namespace {

constexpr double cut_factor = 0.7;      // of what was in flight, at a refusal (CUBIC's beta)
constexpr double min_gradient = 0.5;    // at most halved by one round
constexpr std::size_t min_round = 3;    // answers per round at the least, however small the window
constexpr double first_backoff_s = 0.1; // after a refused connection, doubling
constexpr double max_backoff_s = 2.0;
constexpr double min_gain = 0.05;  // a growth must raise the rate by this much to stay,
constexpr double gain_share = 0.5; // or by this share of what it would with room for it, if less
constexpr int quiet_rounds = 4;    // after a growth taken back, rounds before the next

} // namespace

verdict classify(int status, std::string_view error_code, bool may_have_run, bool hopeless) {
    if (status == 0) {
        return may_have_run ? verdict::lost : hopeless ? verdict::hopeless : verdict::retry;
    }
    if (status == 401) {
        return verdict::hopeless; // the token is wrong for every job
    }
    // kpool serve's 503 `unavailable` is given before a kernel is taken (stopping, no kpoold);
    // code it stopped says `stopped` (docs/serve.md, Errors).
    if (status == 429 || (status == 503 && error_code == "unavailable")) {
        return verdict::retry;
    }
    return verdict::answered;
}

feed_policy::feed_policy(policy_settings settings)
    : m_settings(settings),
      m_window(static_cast<double>(std::clamp<std::size_t>(
          settings.initial_window, 1, std::max<std::size_t>(1, settings.max_in_flight)))) {}

std::size_t feed_policy::window() const {
    return std::max<std::size_t>(1, static_cast<std::size_t>(m_window));
}

bool feed_policy::may_send(double now, std::size_t in_flight) const {
    return in_flight < window() && now >= m_hold_until;
}

std::uint64_t feed_policy::sent(double now, std::size_t in_flight) {
    (void)now;
    m_round_peak = std::max(m_round_peak, in_flight);
    return m_tickets++;
}

void feed_policy::answered(double now, std::uint64_t ticket, double latency_ms, double queued_ms) {
    (void)now;
    m_backoff_s = 0;
    m_hold_until = 0; // an answer: the server took one of ours, so there is room again
    if (ticket < m_round_first) {
        return;
    }
    m_round_latency += latency_ms;
    // Without the server's word, the lowest latency seen stands for the code's own time.
    m_round_own += queued_ms >= 0
                       ? std::max(0.0, latency_ms - queued_ms)
                       : (m_min_latency > 0 ? std::min(latency_ms, m_min_latency) : latency_ms);
    if (++m_round_answers >= std::max<std::size_t>(min_round, window())) {
        end_round();
    }
}

void feed_policy::end_round() {
    const double mean = m_round_latency / static_cast<double>(m_round_answers);
    m_min_latency = m_min_latency > 0 ? std::min(m_min_latency, mean) : mean;
    // Answers a second, by Little's law: what was in flight over how long each took. Counted
    // over the round's clock instead, equal jobs answer in bursts and a round's rate is
    // whichever bursts it happened to span.
    const double rate = static_cast<double>(m_round_peak) / std::max(1e-3, mean);
    m_quiet = std::max(0, m_quiet - 1);
    if (!m_round_cut && m_round_latency > 0) {
        const double gradient =
            std::clamp(m_settings.tolerance * m_round_own / m_round_latency, min_gradient, 1.0);
        const double wanted =
            m_grown_from > 0 ? std::min(min_gain, gain_share * (m_window / m_grown_from - 1)) : 0;
        if (m_grown_from > 0 && rate < m_rate_before * (1 + wanted)) {
            // The last growth bought no throughput (the server's CPU, not its queue, is the
            // limit): take it back, and leave it a few rounds before trying again.
            m_window = m_grown_from;
            m_slow_start = false;
            m_grown_from = 0;
            m_quiet = quiet_rounds;
        } else if (gradient >= 1.0) {
            m_grown_from = 0;
            // Grow only a window that was used: a slow source of jobs proves nothing.
            if (static_cast<double>(m_round_peak) >= std::floor(m_window) && m_quiet == 0) {
                m_grown_from = m_window;
                m_rate_before = rate;
                m_window = m_slow_start ? m_window * 2 : m_window + 1;
            }
        } else {
            m_grown_from = 0;
            // Requests queued for kernels: the window that keeps the queue at the tolerance, and
            // one more to keep probing.
            m_slow_start = false;
            m_window = std::max(1.0, std::min(m_window, m_window * gradient + 1));
        }
        m_window = std::min(
            m_window, static_cast<double>(std::max<std::size_t>(1, m_settings.max_in_flight)));
    }
    m_round_answers = 0;
    m_round_latency = m_round_own = 0;
    m_round_peak = 0;
    m_round_cut = false;
    m_round_first = m_tickets;
}

double feed_policy::refused(double now, std::size_t in_flight, double retry_after_s) {
    if (!m_round_cut) {
        m_round_cut = true;
        m_slow_start = false;
        m_grown_from = 0;
        m_window = std::max(1.0, std::min(m_window, static_cast<double>(in_flight)) * cut_factor);
    }
    const double retry_at =
        now + (retry_after_s >= 0 ? retry_after_s : std::max(first_backoff_s, m_backoff_s));
    m_hold_until = std::max(m_hold_until, retry_at);
    return retry_at;
}

double feed_policy::unreachable(double now) {
    m_backoff_s = std::clamp(m_backoff_s * 2, first_backoff_s, max_backoff_s);
    m_hold_until = std::max(m_hold_until, now + m_backoff_s);
    // The server is down or restarting: when it is back, find its capacity again from half.
    m_window = std::max(1.0, m_window / 2);
    m_slow_start = true;
    return m_hold_until;
}

} // namespace kpool::remote
