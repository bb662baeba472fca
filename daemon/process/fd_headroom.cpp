// fd_headroom: file descriptors counted at most once a second, starts estimated in between.
#include "daemon/process/fd_headroom.hpp"

#include <sys/resource.h>

#include <filesystem>
#include <fmt/format.h>

namespace kpool::daemon {
namespace {

constexpr auto recount_after = std::chrono::seconds(1);

int open_fd_count() {
    std::error_code ec;
    int n = 0;
    for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
         !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
        ++n;
    }
    return n;
}

long soft_fd_limit() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) {
        return 0;
    }
    return static_cast<long>(limit.rlim_cur);
}

} // namespace

fd_headroom::fd_headroom(std::function<int()> count_open, std::function<long()> limit)
    : m_count_open(std::move(count_open)), m_limit(std::move(limit)) {}

fd_headroom fd_headroom::of_this_process() { return fd_headroom(open_fd_count, soft_fd_limit); }

status fd_headroom::reserve_for_start(std::chrono::steady_clock::time_point now) {
    const long limit = m_limit();
    if (limit <= 0) {
        return ok_status();
    }
    auto fits = [&](int open) { return open + per_kernel + reserved <= limit; };
    int estimate = m_counted + m_starts_since * per_kernel;
    // Count afresh when the estimate is stale, or when it says no (it only ever overestimates
    // what starts cost, and knows nothing of what was freed).
    if (!m_fresh || now - m_counted_at >= recount_after || !fits(estimate)) {
        m_counted = m_count_open();
        m_counted_at = now;
        m_starts_since = 0;
        m_fresh = true;
        estimate = m_counted;
    }
    if (!fits(estimate)) {
        return error{errc::capacity,
                     fmt::format("out of file descriptors ({} of {} open; a kernel needs about {} "
                                 "and {} are kept for clients)",
                                 estimate, limit, per_kernel, reserved)};
    }
    ++m_starts_since;
    return ok_status();
}

} // namespace kpool::daemon
