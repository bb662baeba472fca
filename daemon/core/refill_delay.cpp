// refill_delay.hpp's choice of the delay between an acquire and its pool's refill.
#include "daemon/core/refill_delay.hpp"

#include <cmath>

namespace kpool::daemon {

constexpr double forked_default_s = 0.05;
constexpr double spawned_default_s = 1.0;

std::chrono::milliseconds refill_delay::duration() const {
    return std::chrono::milliseconds(std::llround(seconds * 1000));
}

std::string refill_delay::why(const std::string& pool_name) const {
    switch (from) {
    case source::pool: return "[pools." + pool_name + "] refill_delay_s";
    case source::daemon: return "[daemon] refill_delay_s";
    case source::forked_default: return "default for forked kernels: a fork costs little CPU";
    case source::spawned_default: break;
    }
    return "default for spawned kernels: their start-up (about a second of CPU) waits until the "
           "first cells have run";
}

refill_delay refill_delay_for(const config::daemon_config& d, const config::pool_config& p,
                              bool forks) {
    if (p.refill_delay_s) {
        return {*p.refill_delay_s, refill_delay::source::pool};
    }
    if (d.refill_delay_s) {
        return {*d.refill_delay_s, refill_delay::source::daemon};
    }
    if (forks) {
        return {forked_default_s, refill_delay::source::forked_default};
    }
    return {spawned_default_s, refill_delay::source::spawned_default};
}

} // namespace kpool::daemon
