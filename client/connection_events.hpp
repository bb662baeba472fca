// What a ZeroMQ socket monitor says about a control connection to kpoold, for the blocking
// client (client/control_client.cpp) and kpool serve's channels (serve/control_channel.cpp):
// which events mean that no reply will come on it, the error each is for the user, and the
// event that opens it again.
#pragma once

#include "protocol/result.hpp"

#include <zmq.hpp>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace kpool::client {

// The events that end a connection (refused, dropped, or its handshake refused). Only these and
// the handshake that opens one are asked for: an event per request would cost each a wake-up.
inline constexpr int lost_connection_events = ZMQ_EVENT_HANDSHAKE_FAILED_AUTH |
                                              ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL |
                                              ZMQ_EVENT_CONNECT_RETRIED | ZMQ_EVENT_DISCONNECTED;

// ZMTP heartbeats on a long-lived control connection: a daemon whose host went silent (no FIN,
// no RST: a power cut, a partition) is a dropped connection after this long, not a wait for
// each request's whole deadline. kpoold's libzmq answers the pings itself, busy loop or not.
inline constexpr std::chrono::milliseconds heartbeat_interval{1000};
inline constexpr std::chrono::milliseconds heartbeat_timeout{5000};

// `watched`'s connection `events`, on a PAIR socket of ours (socket()). Declared after the
// watched socket, so that it goes first: its destructor stops the monitoring before the PAIR
// closes. A PAIR closed while monitoring goes on leaves libzmq sending events nobody takes (a
// message leaked, or its I/O thread blocked on a full pipe: libzmq issue 3575).
class connection_monitor {
public:
    connection_monitor(zmq::context_t& zmq, zmq::socket_t& watched, int events);
    ~connection_monitor();
    connection_monitor(const connection_monitor&) = delete;
    connection_monitor& operator=(const connection_monitor&) = delete;

    zmq::socket_t& socket() { return m_pair; }

private:
    zmq::socket_t& m_watched;
    zmq::socket_t m_pair;
};

// The event number in a monitor message's first frame (0 if it is too short to hold one).
std::uint16_t monitor_event_id(std::string_view first_frame);

// The error for a request on the connection to `endpoint` that `event` ended (unavailable: try
// another daemon; bad_request: this client is refused), or nothing for any other event.
std::optional<error> lost_connection_error(std::uint16_t event, const std::string& endpoint);

} // namespace kpool::client
