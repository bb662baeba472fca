// The status op's JSON for a pool (protocol/PROTOCOL.md, "status"): built here, in the layer that
// speaks the protocol, from what the pool state machine and the autosizer expose, so neither
// knows the wire shape. Counters come from pool_counter_table, like the Prometheus series.
#pragma once

#include "daemon/core/pool.hpp"

#include <nlohmann/json.hpp>

namespace kpool::daemon {

// {"name", "kernelspec", "size", "warm", ..., "counters", "auto", "recent", "kernels"}. The
// caller adds what the pool does not know (launcher, kernelspec details).
nlohmann::json pool_status_json(const pool& p, clock::time_point now);

// {"min", "max", "target", "rate_per_s", "time_to_warm_s"}.
nlohmann::json autosizer_status_json(const autosizer& a, clock::time_point now);

} // namespace kpool::daemon
