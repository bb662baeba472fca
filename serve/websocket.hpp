// One websocket connection, upgraded from an HTTP/1.1 request through H2O (its wslay-based
// websocket support, on the same libuv loop). RAII over H2O's connection: destroying this
// object closes the socket. Messages go out in order; a client that reads too slowly to keep
// the queue under its limit is disconnected rather than letting memory grow without bound.
#pragma once

#include "serve/http_server.hpp"

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <string_view>

struct st_h2o_websocket_conn_t;
struct wslay_event_on_msg_recv_arg;

namespace kpool::serve {

class websocket {
public:
    struct handlers {
        // A whole text or binary message. May send; must not destroy this object.
        std::function<void(std::string_view data, bool binary)> on_message;
        // The connection is over (client closed, network error, too slow). Once; must not
        // destroy this object synchronously (defer it to the next loop turn).
        std::function<void()> on_close;
    };

    // Answers `exchange` with 101 Switching Protocols (with `subprotocol` when not empty). An
    // error, and no answer, when the request is not a websocket handshake over HTTP/1.
    static result<std::unique_ptr<websocket>> accept(http_exchange& exchange,
                                                     std::string_view subprotocol,
                                                     std::size_t max_message, handlers on);
    ~websocket();
    websocket(const websocket&) = delete;
    websocket& operator=(const websocket&) = delete;

    void send(std::string_view data, bool binary);
    // Sends a close frame (1000, or `code`); on_close follows when the client answers it.
    void close(int code = 1000);
    bool is_open() const { return m_conn != nullptr && !m_closed; }

private:
    websocket() = default;
    static void on_event(st_h2o_websocket_conn_t* conn, const wslay_event_on_msg_recv_arg* arg);
    void flush();
    void closed();

    st_h2o_websocket_conn_t* m_conn = nullptr;
    handlers m_on;
    bool m_closed = false;
    bool m_in_callback = false;
};

// Whether the request asks for a websocket (GET with Upgrade: websocket).
bool is_websocket_request(const http_exchange& exchange);

} // namespace kpool::serve
