// kpoold's control protocol from the event loop: one DEALER socket to one daemon, requests
// tagged with a req_id and matched to their replies, each request answered exactly once (its
// reply, or an error when none came in time) while the channel lives. An acquire whose reply comes
// after its caller gave up holds a kernel nobody will use: it is released at once, so no kernel
// leaks. The socket's monitor says when the connection is lost (kpoold killed, its host silent
// past the heartbeat, the connection refused): what is pending fails at once, and so does every
// request until the connection is back, so kpool serve tries another daemon at once instead of
// waiting out a deadline.
#pragma once

#include "client/connection_events.hpp"
#include "client/control_client.hpp"
#include "loop/uv_timer.hpp"
#include "loop/zmq_watcher.hpp"
#include "protocol/result.hpp"

#include <nlohmann/json.hpp>
#include <uv.h>
#include <zmq.hpp>

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace kpool::serve {

class control_channel {
public:
    using reply_fn = std::function<void(result<nlohmann::json>)>;

    control_channel(uv_loop_t* loop, zmq::context_t& zmq, std::string endpoint,
                    client::curve_keys keys = {});
    ~control_channel(); // pending requests are dropped: see control_channel.cpp
    control_channel(const control_channel&) = delete;
    control_channel& operator=(const control_channel&) = delete;

    // Sends `request` (a req_id is added) and calls `done` once with the reply object ("ok":
    // false included) or an error: `timeout` (no reply within `timeout`) or `unavailable` (no
    // daemon there).
    void request(nlohmann::json request, std::chrono::milliseconds timeout, reply_fn done);

    const std::string& endpoint() const { return m_endpoint; }
    // Why the connection is down now (a request fails at once), if it is.
    const std::optional<error>& lost() const { return m_lost; }

private:
    struct pending_request {
        reply_fn done;
        std::unique_ptr<loop::uv_timer> deadline;
        bool acquire = false;
    };
    void on_readable();
    void on_monitor_event();
    void on_reply(const nlohmann::json& reply);
    void give_up(std::uint64_t id, error why);
    void connect();

    uv_loop_t* m_loop;
    zmq::context_t& m_zmq;
    std::string m_endpoint;
    client::curve_keys m_keys;
    zmq::socket_t m_socket;
    std::unique_ptr<loop::zmq_watcher> m_watcher;          // after m_socket
    std::unique_ptr<client::connection_monitor> m_monitor; // after m_socket: it goes first
    std::unique_ptr<loop::zmq_watcher> m_monitor_watcher;  // after m_monitor
    std::optional<error> m_lost;
    std::uint64_t m_next_id = 1;
    std::map<std::uint64_t, pending_request> m_pending;
    std::map<std::uint64_t, bool> m_abandoned_acquires; // timed out; a late kernel is released
};

} // namespace kpool::serve
