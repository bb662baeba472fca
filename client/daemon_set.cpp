// daemon_set: which kpoold to ask, failover, and the owner of each kernel.
#include "client/daemon_set.hpp"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <set>

namespace kpool::client {
namespace {

using json = nlohmann::json;

// Replies after which an acquire tries the next daemon: this one cannot serve it now.
bool fails_over(const json& reply) {
    static const std::set<std::string> codes = {"capacity", "unavailable", "unknown_pool",
                                                "shutting_down"};
    return codes.count(reply.value("error", json::object()).value("code", std::string())) != 0;
}

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
        return error{errc::bad_request, "'" + item + "': cannot resolve " + name + ": " + gai_strerror(rc)};
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
        std::string item = setting.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
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
    : m_endpoints(std::move(endpoints)), m_keys(std::move(keys)) {
    for (const auto& e : m_endpoints) {
        m_views[e];
    }
}

control_client& daemon_set::daemon(const std::string& endpoint) {
    auto& c = m_clients[endpoint];
    if (!c) {
        c = std::make_unique<control_client>(endpoint, m_keys);
    }
    return *c;
}

bool daemon_set::is_down(const view& v, clock::time_point now) const {
    return v.down_until && *v.down_until > now;
}

void daemon_set::learn_status(const std::string& endpoint, const json& status) {
    view& v = m_views[endpoint];
    v.warm.clear();
    for (const json& p : status.value("pools", json::array())) {
        if (!p.value("removed", false) && !p.value("drained", false)) {
            v.warm[p.value("name", std::string())] = p.value("warm", 0);
        }
    }
    v.learnt = clock::now();
    v.down_until.reset();
}

void daemon_set::refresh_stale_views(std::chrono::milliseconds budget) {
    const auto now = clock::now();
    // Reading views must not eat the acquire's time: a short wait per daemon.
    const auto each = std::clamp(budget / 4, std::chrono::milliseconds(1), std::chrono::milliseconds(200));
    for (const auto& e : m_endpoints) {
        view& v = m_views[e];
        if (is_down(v, now) || (v.learnt && now - *v.learnt < view_ttl)) {
            continue;
        }
        auto reply = daemon(e).request({{"op", "status"}}, each);
        if (reply && reply->value("ok", false)) {
            learn_status(e, *reply);
        } else if (!reply) {
            v.down_until = clock::now() + down_for;
        }
    }
}

std::vector<std::string> daemon_set::order(const std::string& pool) {
    const auto now = clock::now();
    std::vector<std::string> up;
    std::vector<std::string> down;
    bool fresh = true;
    for (const auto& e : m_endpoints) {
        const view& v = m_views[e];
        if (is_down(v, now)) {
            down.push_back(e);
        } else {
            up.push_back(e);
            fresh = fresh && v.learnt && now - *v.learnt < view_ttl;
        }
    }
    std::shuffle(up.begin(), up.end(), m_random);
    std::shuffle(down.begin(), down.end(), m_random);
    auto warm = [&](const std::string& e) {
        const auto& w = m_views[e].warm;
        auto it = w.find(pool);
        return it == w.end() ? 0 : it->second;
    };
    auto by_warm = [&](const std::string& a, const std::string& b) { return warm(a) > warm(b); };
    if (!fresh && up.size() >= 2) {
        // Power of two choices: the better of two picked at random goes first.
        if (warm(up[1]) > warm(up[0])) {
            std::swap(up[0], up[1]);
        }
        std::stable_sort(up.begin() + 1, up.end(), by_warm);
    } else {
        std::stable_sort(up.begin(), up.end(), by_warm); // stable: the shuffle breaks ties
    }
    up.insert(up.end(), down.begin(), down.end());
    return up;
}

daemon_set::answer daemon_set::acquire(const json& request, std::chrono::milliseconds wait) {
    const std::string pool = request.value("pool", std::string());
    if (m_endpoints.size() == 1) {
        answer a{first().request(request, wait), m_endpoints.front()};
        if (a.reply && a.reply->value("ok", false)) {
            m_owner[a.reply->value("kernel_id", std::string())] = a.endpoint;
        }
        return a;
    }
    const auto deadline = clock::now() + wait;
    refresh_stale_views(wait);
    answer last{error{errc::timeout, "no kpoold answered within " + std::to_string(wait.count()) + " ms"}, ""};
    for (const auto& e : order(pool)) {
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now());
        if (left.count() <= 0) {
            break;
        }
        json attempt = request;
        // The daemon waits for a kernel only as long as this client still does (with room for
        // the reply to come back).
        const auto margin = std::chrono::milliseconds(5000);
        attempt["timeout_ms"] = std::max<std::int64_t>(0, (left - margin).count());
        if (request.contains("timeout_ms")) {
            attempt["timeout_ms"] = std::min(attempt["timeout_ms"].get<std::int64_t>(),
                                             request["timeout_ms"].get<std::int64_t>());
        }
        answer a{daemon(e).request(attempt, left), e};
        view& v = m_views[e];
        if (!a.reply) {
            v.down_until = clock::now() + down_for;
            last = std::move(a);
            continue;
        }
        if (a.reply->value("ok", false)) {
            v.warm[pool] = a.reply->value("pool_warm", 0);
            v.down_until.reset();
            m_owner[a.reply->value("kernel_id", std::string())] = e;
            return a;
        }
        if (!fails_over(*a.reply)) {
            return a;
        }
        v.warm[pool] = 0;
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
        const bool not_here = !a.reply->value("ok", false) &&
                              a.reply->value("error", json::object()).value("code", std::string()) ==
                                  "unknown_kernel";
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
        answer a{daemon(e).request({{"op", "status"}}, timeout), e};
        if (a.reply && a.reply->value("ok", false)) {
            learn_status(e, *a.reply);
        }
        out.push_back(std::move(a));
    }
    return out;
}

} // namespace kpool::client
