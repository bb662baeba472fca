// status_json: a pool's status as the control protocol shows it.
#include "daemon/service/status_json.hpp"

#include <cmath>

namespace kpool::daemon {
namespace {

using json = nlohmann::json;

double milli_rounded(double v) { return std::round(v * 1000) / 1000; }

double seconds_between(clock::time_point a, clock::time_point b) {
    return std::chrono::duration<double>(b - a).count();
}

json kernel_json(const kernel_entry& k, clock::time_point now) {
    json entry{{"id", k.id},
               {"pool", k.pool},
               {"pid", k.pid},
               {"state", to_string(k.state)},
               {"age_s", milli_rounded(seconds_between(k.created, now))}};
    if (k.lease_deadline) {
        entry["lease_remaining_s"] = milli_rounded(seconds_between(now, *k.lease_deadline));
    }
    return entry;
}

} // namespace

json autosizer_status_json(const autosizer& a, clock::time_point now) {
    return {{"min", a.parameters().min},
            {"max", a.parameters().max},
            {"target", a.target()},
            {"rate_per_s", milli_rounded(a.rate_per_s(now))},
            {"time_to_warm_s",
             a.time_to_warm_s() < 0 ? json(nullptr) : json(milli_rounded(a.time_to_warm_s()))}};
}

json pool_status_json(const pool& p, clock::time_point now) {
    json kernels = json::array();
    for (const auto& [id, k] : p.kernels()) {
        kernels.push_back(kernel_json(k, now));
    }
    const pool_counters& c = p.counters();
    json counters = json::object();
    for (const counter_description& d : pool_counter_table) {
        counters[d.name] = c.*d.field;
    }
    auto recent = [](std::optional<double> v, double scale) {
        return v ? json(milli_rounded(*v * scale)) : json(nullptr);
    };
    const config::pool_config& cfg = p.config();
    return json{
        {"name", cfg.name},
        {"kernelspec", cfg.kernelspec},
        {"size", cfg.size},
        {"warm", p.count(kernel_state::warm)},
        {"starting", p.count(kernel_state::starting)},
        {"leased", p.count(kernel_state::leased)},
        {"stopping", p.count(kernel_state::stopping)},
        {"waiting", p.waiting()},
        {"failing", p.failing()},
        {"drained", p.drained()},
        {"removed", p.retired()},
        {"consecutive_failures", p.consecutive_failures()},
        {"counters", counters},
        {"last_error", c.last_error.empty() ? json(nullptr) : json(c.last_error)},
        {"auto", p.auto_sizer() ? autosizer_status_json(*p.auto_sizer(), now) : json(nullptr)},
        // Over the last 256 of each: acquire request to reply, launch to warm.
        {"recent",
         {{"acquire_ms_p50", recent(p.recent_acquire_seconds().percentile(50), 1000)},
          {"acquire_ms_p99", recent(p.recent_acquire_seconds().percentile(99), 1000)},
          {"time_to_warm_s_p50", recent(p.recent_warm_seconds().percentile(50), 1)}}},
        {"kernels", std::move(kernels)}};
}

} // namespace kpool::daemon
