// The daemons a command talks to: one endpoint, several (comma-separated), or `dns:NAME:PORT`
// (every A record of NAME, e.g. a Kubernetes headless Service). An acquire goes to the daemon
// most likely to have a warm kernel of the pool, by a short-lived view of each daemon's warm
// kernels (from status, read at most every view_ttl, and from every acquire reply's pool_warm),
// and fails over to the next on unreachable, capacity, unavailable, unknown_pool or
// shutting_down, within the same overall wait. Requests about a kernel go to the daemon that
// handed it out, or, when this process does not know it, to every daemon until one does.
// python/kpool/spread.py is the same for the Python client.
#pragma once

#include "client/control_client.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace kpool::client {

// The endpoints a setting names, each once, in order; dns: names resolved (IPv4, sorted).
result<std::vector<std::string>> parse_endpoints(const std::string& setting);

class daemon_set {
public:
    using clock = std::chrono::steady_clock;
    static constexpr std::chrono::milliseconds view_ttl{1000};
    static constexpr std::chrono::milliseconds down_for{2000};

    daemon_set(std::vector<std::string> endpoints, curve_keys keys);

    const std::vector<std::string>& endpoints() const { return m_endpoints; }
    control_client& daemon(const std::string& endpoint);
    control_client& first() { return daemon(m_endpoints.front()); }

    // The acquire request's reply from the daemon that served it (or the last refusal, or why
    // no daemon answered), and which daemon that was.
    struct answer {
        result<nlohmann::json> reply;
        std::string endpoint;
    };
    answer acquire(const nlohmann::json& request, std::chrono::milliseconds wait);

    // A request about `kernel_id` (release, signal, poll).
    answer request_for_kernel(const std::string& kernel_id, const nlohmann::json& request,
                              std::chrono::milliseconds timeout);

    // Every daemon's status reply (or why there is none), in endpoint order.
    std::vector<answer> statuses(std::chrono::milliseconds timeout);

    // The order acquires for `pool` try the daemons in (exposed for tests).
    std::vector<std::string> order(const std::string& pool);

private:
    struct view {
        std::map<std::string, int> warm; // per pool
        std::optional<clock::time_point> learnt;
        std::optional<clock::time_point> down_until;
    };
    void learn_status(const std::string& endpoint, const nlohmann::json& status);
    void refresh_stale_views(std::chrono::milliseconds budget);
    bool is_down(const view& v, clock::time_point now) const;

    std::vector<std::string> m_endpoints;
    curve_keys m_keys;
    std::map<std::string, std::unique_ptr<control_client>> m_clients;
    std::map<std::string, view> m_views;
    std::map<std::string, std::string> m_owner; // kernel id -> endpoint
    std::mt19937 m_random{std::random_device{}()};
};

} // namespace kpool::client
