// Whether the daemon has file descriptors to spare for one more starting kernel, without listing
// /proc/self/fd for every start: the count is read at most once a second (or when the estimate
// nears the limit), and each start in between is counted as its cost. A start that would eat
// into the reserve kept for control clients is refused with `capacity` rather than left to fail
// halfway through with EMFILE.
#pragma once

#include "protocol/result.hpp"

#include <chrono>
#include <functional>

namespace kpool::daemon {

class fd_headroom {
public:
    // File descriptors a kernel costs the daemon while it starts (connection file, two output
    // pipes, a pidfd, a shell socket and its mailbox) with room to spare, and those kept back.
    static constexpr int per_kernel = 10;
    static constexpr int reserved = 32;

    // `count_open` counts the open descriptors; `limit` is RLIMIT_NOFILE's soft limit (0: none).
    fd_headroom(std::function<int()> count_open, std::function<long()> limit);
    // The process's own: /proc/self/fd and getrlimit.
    static fd_headroom of_this_process();

    // ok, and the start is counted; or `capacity` saying how many are open.
    status reserve_for_start(std::chrono::steady_clock::time_point now);
    // Descriptors were freed (a kernel exited): the next check counts afresh.
    void released() { m_fresh = false; }

private:
    std::function<int()> m_count_open;
    std::function<long()> m_limit;
    std::chrono::steady_clock::time_point m_counted_at{};
    int m_counted = 0;
    int m_starts_since = 0;
    bool m_fresh = false;
};

} // namespace kpool::daemon
