// Where a client of several kpoolds sends an acquire, and when it tries the next daemon
// (PROTOCOL.md, "Several daemons"): a short-lived view of each daemon's warm kernels per pool
// (from status, at most view_ttl old, and from every acquire reply's pool_warm), most warm
// first, random among equals, the better of two picked at random when the views are stale
// (power of two choices); a daemon that did not answer goes last for down_for; the refusals
// after which another daemon may serve the request. Pure (no sockets, no loop): the blocking
// client::daemon_set and kpool serve (on its loop) share it; python/kpool/spread.py is the same
// policy for the Python client.
#pragma once

#include "protocol/pool_names.hpp"
#include "protocol/result.hpp"

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace kpool::client {

class spread {
public:
    using clock = std::chrono::steady_clock;
    static constexpr std::chrono::milliseconds view_ttl{1000};
    static constexpr std::chrono::milliseconds down_for{2000};
    // Kept from a client's wait when it tells a daemon how long to wait for a kernel: the reply
    // must still come back in time.
    static constexpr std::chrono::milliseconds reply_margin{5000};

    // A daemon's status: its pools that serve (not removed, not drained) and their warm kernels.
    void learn_status(const std::string& endpoint, const std::vector<protocol::pool_summary>& pools,
                      clock::time_point now = clock::now());
    // An acquire it served: `pool_warm` kernels left.
    void learn_acquired(const std::string& endpoint, const std::string& pool, int pool_warm);
    // An acquire it refused in a way that sends the client on: none there for now.
    void learn_refused(const std::string& endpoint, const std::string& pool);
    // No answer: asked last for down_for.
    void mark_down(const std::string& endpoint, clock::time_point now = clock::now());

    bool is_down(const std::string& endpoint, clock::time_point now = clock::now()) const;
    // Up, and its view older than view_ttl (or never read).
    bool stale(const std::string& endpoint, clock::time_point now = clock::now()) const;
    // The order in which to try `endpoints` for an acquire of `pool` (any other request: pool "").
    std::vector<std::string> order(const std::string& pool,
                                   const std::vector<std::string>& endpoints,
                                   clock::time_point now = clock::now());

    // A refusal after which another daemon may serve the request: this one cannot now
    // (capacity, unavailable, shutting_down) or does not serve the pool (unknown_pool).
    static bool fails_over(const error& refusal);
    // The timeout_ms an attempt asks for when the client has `left` of its wait (and asked for
    // `asked`, if it did): the daemon stops waiting before the client does.
    static std::int64_t attempt_timeout_ms(std::optional<std::int64_t> asked,
                                           std::chrono::milliseconds left);

private:
    struct view {
        std::map<std::string, int> warm; // per pool
        std::optional<clock::time_point> learnt;
        std::optional<clock::time_point> down_until;
    };
    std::map<std::string, view> m_views;
    std::mt19937 m_random{std::random_device{}()};
};

} // namespace kpool::client
