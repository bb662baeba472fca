// The daemons a command talks to: one endpoint, several (comma-separated), or `dns:NAME:PORT`
// (every A record of NAME, e.g. a Kubernetes headless Service). An acquire goes where
// client/spread.hpp says (the daemon most likely to have a warm kernel, failing over within the
// same overall wait), stale views read first with a short status each. Requests about a kernel
// go to the daemon that handed it out, or, when this process does not know it, to every daemon
// until one does.
#pragma once

#include "client/control_client.hpp"
#include "client/spread.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kpool::client {

// The endpoints a setting names, each once, in order; dns: names resolved (IPv4, sorted).
result<std::vector<std::string>> parse_endpoints(const std::string& setting);

class daemon_set {
public:
    using clock = std::chrono::steady_clock;

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
    void learn_status(const std::string& endpoint, const nlohmann::json& status);
    void refresh_stale_views(std::chrono::milliseconds budget);

    std::vector<std::string> m_endpoints;
    curve_keys m_keys;
    std::map<std::string, std::unique_ptr<control_client>> m_clients;
    spread m_spread;
    std::map<std::string, std::string> m_owner; // kernel id -> endpoint
};

} // namespace kpool::client
