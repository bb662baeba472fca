// refill_delay.hpp's choice of the delay between an acquire and its pool's refill.
#include "daemon/core/refill_delay.hpp"

#include <cmath>

namespace kpool::daemon {

constexpr double forked_default_s = 0.05;
constexpr double spawned_default_s = 1.0;

std::chrono::milliseconds refill_delay::duration() const {
    return std::chrono::milliseconds(std::llround(seconds * 1000));
}

refill_delay refill_delay_for(const config::daemon_config& d, const config::pool_config& p,
                              bool forks) {
    if (p.refill_delay_s) {
        return {*p.refill_delay_s, "[pools." + p.name + "] refill_delay_s"};
    }
    if (d.refill_delay_s) {
        return {*d.refill_delay_s, "[daemon] refill_delay_s"};
    }
    if (forks) {
        return {forked_default_s, "default for forked kernels: a fork costs little CPU"};
    }
    return {spawned_default_s,
            "default for spawned kernels: their start-up (about a second of CPU) waits until "
            "the first cells have run"};
}

} // namespace kpool::daemon
