// connection_events: monitor events of a control connection, read as errors a user can act on.
#include "client/connection_events.hpp"

#include "client/control_client.hpp"

#include <atomic>
#include <cstring>

namespace kpool::client {

connection_monitor::connection_monitor(zmq::context_t& zmq, zmq::socket_t& watched, int events)
    : m_watched(watched), m_pair(zmq, zmq::socket_type::pair) {
    // A fresh inproc name each time: inproc names are per context, and contexts are shared.
    static std::atomic<unsigned> monitors = 0;
    const std::string address = "inproc://kpool-monitor-" + std::to_string(++monitors);
    if (zmq_socket_monitor(m_watched.handle(), address.c_str(), events) != 0) {
        throw zmq::error_t();
    }
    m_pair.set(zmq::sockopt::linger, 0);
    m_pair.connect(address);
}

connection_monitor::~connection_monitor() { zmq_socket_monitor(m_watched.handle(), nullptr, 0); }

std::uint16_t monitor_event_id(std::string_view first_frame) {
    std::uint16_t id = 0;
    if (first_frame.size() >= sizeof id) {
        std::memcpy(&id, first_frame.data(), sizeof id);
    }
    return id;
}

std::optional<error> lost_connection_error(std::uint16_t event, const std::string& endpoint) {
    switch (event) {
    case ZMQ_EVENT_CONNECT_RETRIED:
        return error{errc::unavailable, "cannot reach kpoold at " + endpoint +
                                            ": connection refused (is kpoold running?)"};
    case ZMQ_EVENT_DISCONNECTED:
        return error{errc::unavailable,
                     "the connection to kpoold at " + endpoint +
                         " was dropped before a reply (kpoold went away, or did not complete the "
                         "handshake within " +
                         std::to_string(connect_timeout.count()) + " ms)"};
    case ZMQ_EVENT_HANDSHAKE_FAILED_AUTH:
        return error{errc::bad_request,
                     "cannot talk to kpoold at " + endpoint +
                         ": it refused this client (not an allowed uid or CURVE key)"};
    case ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL:
        return error{errc::bad_request, "cannot talk to kpoold at " + endpoint +
                                            ": the security handshake failed (CURVE on one side "
                                            "only, or a wrong server key?)"};
    default: return std::nullopt;
    }
}

} // namespace kpool::client
