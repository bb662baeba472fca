// What a feed did, counted as it goes and summed up at the end as one JSON object (kpool feed's
// last line on stderr; the Python clients' `stats`, same names): jobs, requests, answers by
// status, retries, bytes, time, rate and latency.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <map>
#include <vector>

namespace kpool::remote {

struct feed_stats {
    std::size_t jobs = 0;     // answered, one way or another
    std::size_t ok = 0;       // 200, and the code did not raise
    std::size_t raised = 0;   // 200, and the code raised (Kpool-Outcome: error)
    std::size_t failed = 0;   // any other answer, or none
    std::size_t requests = 0; // sent, retries included
    std::size_t retries = 0;
    std::size_t no_answer = 0;            // requests without an HTTP answer (refused, reset)
    std::map<int, std::size_t> responses; // by HTTP status
    std::size_t bytes_sent = 0;
    std::size_t bytes_received = 0;
    std::size_t peak_in_flight = 0;
    std::vector<double> latencies_ms; // of the requests that were answered

    // The summary after `seconds`; `window` the policy's at the end.
    nlohmann::ordered_json summary(double seconds, std::size_t window) const;
};

} // namespace kpool::remote
