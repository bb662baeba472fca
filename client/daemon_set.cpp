// daemon_set: which kpoold to ask, failover, and the owner of each kernel.
#include "client/daemon_set.hpp"

#include "protocol/control_replies.hpp"
#include "protocol/control_requests.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <set>

namespace kpool::client {
namespace {

using json = nlohmann::json;

result<std::vector<std::string>> resolve_dns(const std::string& item) {
    const std::string rest = item.substr(4);
    const auto colon = rest.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == rest.size() ||
        !std::all_of(rest.begin() + static_cast<long>(colon) + 1, rest.end(), ::isdigit)) {
        return error{errc::bad_request, "'" + item + "': expected dns:NAME:PORT"};
    }
    const std::string name = rest.substr(0, colon);
    const std::string port = rest.substr(colon + 1);
    addrinfo hints{};
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* found = nullptr;
    if (const int rc = ::getaddrinfo(name.c_str(), port.c_str(), &hints, &found); rc != 0) {
        return error{errc::bad_request,
                     "'" + item + "': cannot resolve " + name + ": " + gai_strerror(rc)};
    }
    std::set<std::string> addresses;
    for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
        char text[INET_ADDRSTRLEN] = {};
        const auto* sin = reinterpret_cast<const sockaddr_in*>(a->ai_addr);
        if (::inet_ntop(AF_INET, &sin->sin_addr, text, sizeof text) != nullptr) {
            addresses.insert(text);
        }
    }
    ::freeaddrinfo(found);
    std::vector<std::string> out;
    for (const auto& ip : addresses) {
        out.push_back("tcp://" + ip + ":" + port);
    }
    return out;
}

} // namespace

result<std::vector<std::string>> parse_endpoints(const std::string& setting) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= setting.size()) {
        const auto comma = setting.find(',', start);
        std::string item =
            setting.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
        item.erase(0, item.find_first_not_of(" \t"));
        item.erase(item.find_last_not_of(" \t") + 1);
        if (item.starts_with("dns:")) {
            auto resolved = resolve_dns(item);
            if (!resolved) {
                return resolved.err();
            }
            out.insert(out.end(), resolved->begin(), resolved->end());
        } else if (!item.empty()) {
            out.push_back(item);
        }
        if (comma == std::string::npos) {
            break;
        }
        start = comma + 1;
    }
    std::vector<std::string> unique;
    for (auto& e : out) {
        if (std::find(unique.begin(), unique.end(), e) == unique.end()) {
            unique.push_back(std::move(e));
        }
    }
    if (unique.empty()) {
        return error{errc::bad_request, "no endpoint in '" + setting + "'"};
    }
    return unique;
}

daemon_set::daemon_set(std::vector<std::string> endpoints, curve_keys keys)
    : m_endpoints(std::move(endpoints)), m_keys(std::move(keys)) {}

control_client& daemon_set::daemon(const std::string& endpoint) {
    auto& c = m_clients[endpoint];
    if (!c) {
        c = std::make_unique<control_client>(endpoint, m_keys);
    }
    return *c;
}

void daemon_set::learn_status(const std::string& endpoint, const json& status) {
    if (auto pools = protocol::read_status_pools(status)) {
        m_spread.learn_status(endpoint, *pools);
    }
}

void daemon_set::refresh_stale_views(std::chrono::milliseconds budget) {
    // Reading views must not eat the acquire's time: a short wait per daemon.
    const auto each =
        std::clamp(budget / 4, std::chrono::milliseconds(1), std::chrono::milliseconds(200));
    for (const auto& e : m_endpoints) {
        if (!m_spread.stale(e)) {
            continue;
        }
        auto reply = daemon(e).request(protocol::requests::status(), each);
        if (!reply) {
            m_spread.mark_down(e);
        } else if (!protocol::refusal_of(*reply)) {
            learn_status(e, *reply);
        }
    }
}

std::vector<std::string> daemon_set::order(const std::string& pool) {
    return m_spread.order(pool, m_endpoints);
}

daemon_set::answer daemon_set::acquire(const json& request, std::chrono::milliseconds wait) {
    const std::string pool = request.value("pool", std::string());
    if (m_endpoints.size() == 1) {
        answer a{first().request(request, wait), m_endpoints.front()};
        if (a.reply) {
            if (auto acquired = protocol::read_acquire_reply(*a.reply)) {
                m_owner[acquired->kernel_id] = a.endpoint;
            }
        }
        return a;
    }
    const auto deadline = clock::now() + wait;
    refresh_stale_views(wait);
    std::optional<std::int64_t> asked;
    if (auto it = request.find("timeout_ms"); it != request.end() && it->is_number_integer()) {
        asked = it->get<std::int64_t>();
    }
    answer last{
        error{errc::timeout, "no kpoold answered within " + std::to_string(wait.count()) + " ms"},
        ""};
    for (const auto& e : order(pool)) {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
        if (left.count() <= 0) {
            break;
        }
        json attempt = request;
        attempt["timeout_ms"] = spread::attempt_timeout_ms(asked, left);
        answer a{daemon(e).request(attempt, left), e};
        if (!a.reply) {
            m_spread.mark_down(e);
            last = std::move(a);
            continue;
        }
        auto acquired = protocol::read_acquire_reply(*a.reply);
        if (acquired) {
            m_spread.learn_acquired(e, pool, acquired->pool_warm);
            m_owner[acquired->kernel_id] = e;
            return a;
        }
        if (!spread::fails_over(acquired.err())) {
            return a;
        }
        m_spread.learn_refused(e, pool);
        last = std::move(a);
    }
    return last;
}

daemon_set::answer daemon_set::request_for_kernel(const std::string& kernel_id, const json& request,
                                                  std::chrono::milliseconds timeout) {
    std::vector<std::string> candidates;
    if (auto it = m_owner.find(kernel_id); it != m_owner.end()) {
        candidates.push_back(it->second);
    }
    for (const auto& e : m_endpoints) {
        if (std::find(candidates.begin(), candidates.end(), e) == candidates.end()) {
            candidates.push_back(e);
        }
    }
    std::optional<answer> unknown;
    std::optional<answer> unreachable;
    for (const auto& e : candidates) {
        answer a{daemon(e).request(request, timeout), e};
        if (!a.reply) {
            if (!unreachable) {
                unreachable = std::move(a);
            }
            continue;
        }
        const auto refused = protocol::refusal_of(*a.reply);
        const bool not_here = refused && refused->code == errc::unknown_kernel;
        if (!not_here) {
            m_owner[kernel_id] = e;
            return a;
        }
        if (!unknown) {
            unknown = std::move(a);
        }
    }
    // Every daemon reached said it does not know the kernel: that is the answer.
    return unknown ? std::move(*unknown) : std::move(*unreachable);
}

std::vector<daemon_set::answer> daemon_set::statuses(std::chrono::milliseconds timeout) {
    std::vector<answer> out;
    for (const auto& e : m_endpoints) {
        answer a{daemon(e).request(protocol::requests::status(), timeout), e};
        if (a.reply) {
            learn_status(e, *a.reply);
        }
        out.push_back(std::move(a));
    }
    return out;
}

} // namespace kpool::client
