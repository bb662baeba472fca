// How long to wait before trying again something that failed `failures` times in a row: 0.5 s,
// doubling, at most 30 s. One rule for pools (failed kernel starts) and zygotes (exits).
#pragma once

#include <algorithm>
#include <chrono>

namespace kpool::daemon {

constexpr std::chrono::milliseconds backoff_delay(int failures) {
    using namespace std::chrono_literals;
    constexpr auto base = 500ms;
    constexpr auto most = 30000ms;
    if (failures <= 0) {
        return 0ms;
    }
    return std::min<std::chrono::milliseconds>(most, base * (1 << std::min(failures - 1, 10)));
}

static_assert(backoff_delay(1) == std::chrono::milliseconds(500));
static_assert(backoff_delay(3) == std::chrono::milliseconds(2000));
static_assert(backoff_delay(40) == std::chrono::milliseconds(30000));

} // namespace kpool::daemon
