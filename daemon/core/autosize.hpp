// Pool sizing by Little's law, for pools with size = "auto": keep warm + starting at about
// arrival rate x time to warm x a safety factor, within [min, max].
//
// The arrival rate is the larger of two exponentially weighted rates of acquires, a fast one
// (time constant 5 s) that sees a burst within seconds and a slow one (60 s) that remembers
// steady load; the time to warm is an exponentially weighted mean of measured kernel starts.
// Growth is immediate: a burst must not wait, and every acquire that finds the pool empty adds a
// kernel at once, before the rates have caught up. Shrinking waits until the smaller size has been
// enough for a quiet period (a minute), so a pause between bursts does not throw warm kernels
// away. Pure code: time is passed in, so tests script arrivals exactly.
#pragma once

#include <algorithm>
#include <chrono>
#include <cmath>
#include <optional>

namespace kpool::daemon {

class autosizer {
public:
    using clock = std::chrono::steady_clock;

    struct params {
        int min = 0;
        int max = 8;
        double safety = 1.5;
        double fast_time_constant_s = 5;
        double slow_time_constant_s = 60;
        double shrink_after_s = 60;
        double initial_time_to_warm_s = 1.0; // until a kernel start has been measured
    };

    explicit autosizer(params p) : m_params(p), m_target(p.min) {}

    void on_acquire(clock::time_point now);
    // An acquire found no warm kernel: the pool is too small right now, whatever the rates
    // say yet. One more kernel (up to max); shrinking waits for a quiet period as usual.
    void on_wait(clock::time_point now);
    void on_time_to_warm(double seconds);

    // Re-evaluates the target size; returns it (changed or not).
    int update(clock::time_point now);
    int target() const { return m_target; }
    // When update() should next run without a new event: a pending shrink, or (above min) a
    // periodic look at the decaying rate.
    std::optional<clock::time_point> next_check(clock::time_point now) const;

    double rate_per_s(clock::time_point now) const;
    double time_to_warm_s() const { return m_time_to_warm; }
    const params& parameters() const { return m_params; }

private:
    int wanted(clock::time_point now) const;

    // An exponentially weighted count of arrivals, decaying with time constant tau.
    struct weighted_rate {
        double tau;
        double count = 0; // as of the last arrival
        void add(double since_last) { count = count * std::exp(-since_last / tau) + 1; }
        double per_s(double since_last) const {
            // Less half an arrival: right after one the count runs high by about that much.
            return std::max(0.0, count * std::exp(-since_last / tau) - 0.5) / tau;
        }
    };

    params m_params;
    int m_target;
    weighted_rate m_fast{m_params.fast_time_constant_s};
    weighted_rate m_slow{m_params.slow_time_constant_s};
    std::optional<clock::time_point> m_last_arrival;
    double m_time_to_warm = -1;
    std::optional<clock::time_point> m_smaller_since; // wanted < target since then
};

} // namespace kpool::daemon
