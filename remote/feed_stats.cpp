// The feed's statistics, summed up.
#include "remote/feed_stats.hpp"

#include <algorithm>
#include <cmath>
#include <string>

namespace kpool::remote {
namespace {

double rounded(double v) { return std::round(v * 100) / 100; }

// The nearest-rank percentile of sorted values.
double percentile(const std::vector<double>& sorted, double p) {
    const auto rank =
        static_cast<std::size_t>(std::ceil(p / 100 * static_cast<double>(sorted.size())));
    return sorted[std::clamp<std::size_t>(rank, 1, sorted.size()) - 1];
}

} // namespace

nlohmann::ordered_json feed_stats::summary(double seconds, std::size_t window) const {
    nlohmann::ordered_json by_status = nlohmann::ordered_json::object();
    for (const auto& [status, count] : responses) {
        by_status[std::to_string(status)] = count;
    }
    nlohmann::ordered_json latency = nullptr;
    if (!latencies_ms.empty()) {
        std::vector<double> sorted = latencies_ms;
        std::sort(sorted.begin(), sorted.end());
        latency = {{"min", rounded(sorted.front())},
                   {"p50", rounded(percentile(sorted, 50))},
                   {"p99", rounded(percentile(sorted, 99))},
                   {"max", rounded(sorted.back())}};
    }
    return {{"jobs", {{"total", jobs}, {"ok", ok}, {"raised", raised}, {"failed", failed}}},
            {"requests", requests},
            {"responses", by_status},
            {"no_answer", no_answer},
            {"retries", retries},
            {"bytes", {{"sent", bytes_sent}, {"received", bytes_received}}},
            {"seconds", rounded(seconds)},
            {"rate", seconds > 0 ? rounded(static_cast<double>(jobs) / seconds) : 0.0},
            {"latency_ms", latency},
            {"in_flight", {{"peak", peak_in_flight}, {"window", window}}}};
}

} // namespace kpool::remote
