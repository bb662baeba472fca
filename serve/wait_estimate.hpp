// wait_estimate: how long a caller refused with 429 should wait before it tries again. At the
// kernel limit a kernel is free only when a request gives one back and kpoold has started a
// fresh one in its place; kpoold's queue says nothing of the callers who wait outside, sleeping
// on their Retry-After. So kernels come round at (kernels held by requests) / (how long a
// request holds one + the time to warm its successor), by Little's law (the kernels held: the
// recent peak), and each refusal is a
// place in a virtual queue: the requests waiting inside, those already told to come back later,
// then this one. A polite caller then comes back about at its turn, once, not at every second
// (issue #53 item 1). Pure: the caller gives the time; server.cpp keeps one per pool.
#pragma once

#include <chrono>
#include <cstddef>
#include <deque>
#include <optional>
#include <set>

namespace kpool::serve {

class wait_estimate {
public:
    using clock = std::chrono::steady_clock;

    // A request got a kernel; it gave it back (`taken`: when it got it; `used` false: before it
    // could use it, a hold that says nothing of how long requests hold theirs).
    void took(clock::time_point now);
    void returned(clock::time_point taken, clock::time_point now, bool used = true);

    // Kernels held by requests come round at this many per second; none before any request
    // held one. `warm_s`: the pool's time to warm a kernel, which a return costs at the limit.
    std::optional<double> turnover(clock::time_point now, double warm_s) const;

    // The seconds a request arriving now would wait for a kernel behind those waiting inside
    // (and, with `promised`, those told to come back); none before any request held a kernel.
    std::optional<double> expected_wait(clock::time_point now, double waiting, double warm_s,
                                        bool promised = true);

    // The seconds a caller refused now should wait, with `waiting` requests queued for a kernel
    // inside kpool serve; records the promise, so that the next refusal is told its later turn.
    // Never below `fallback_s` (from the pools' time to warm a kernel); 1 to 60.
    int refused(clock::time_point now, double waiting, double warm_s, double fallback_s);

private:
    static constexpr std::size_t kept_holds = 32;
    static constexpr std::chrono::seconds peak_window{30};
    std::multiset<clock::time_point> m_holding; // when each request holding a kernel got it
    // How many requests held kernels at each take, recent ones: at the limit a kernel between
    // two requests (stopping, its successor starting) is held by none, so the number in
    // rotation is the recent peak, not the count at this instant.
    std::deque<std::pair<clock::time_point, std::size_t>> m_peaks;
    std::deque<double> m_holds;               // seconds the latest requests held theirs
    std::deque<clock::time_point> m_promised; // when refused callers were told to come back
};

} // namespace kpool::serve
