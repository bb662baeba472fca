// websocket: H2O's websocket connection (wslay inside) behind a small RAII class.
#include "serve/websocket.hpp"

#define H2O_USE_LIBUV 1
#include <h2o.h>
#include <h2o/websocket.h>

#include <cstring>

namespace kpool::serve {

bool is_websocket_request(const http_exchange& exchange) {
    const std::string_view upgrade = exchange.upgrade();
    return exchange.method() == "GET" && upgrade.size() == 9 &&
           strncasecmp(upgrade.data(), "websocket", 9) == 0;
}

result<std::unique_ptr<websocket>> websocket::accept(http_exchange& exchange,
                                                     std::string_view subprotocol,
                                                     std::size_t max_message, handlers on) {
    const auto key = exchange.header("sec-websocket-key");
    if (!is_websocket_request(exchange) || !key || key->size() != 24) {
        return error{
            errc::bad_request,
            "not a websocket handshake (GET with Upgrade: websocket and a Sec-WebSocket-Key)"};
    }
    const auto version = exchange.header("sec-websocket-version");
    if (version && *version != "13") {
        return error{errc::bad_request, "websocket version " + *version + " (only 13 is spoken)"};
    }
    if (!exchange.is_http1()) {
        // H2O upgrades HTTP/1 connections only; HTTP/2 clients do not offer websockets this way.
        return error{errc::bad_request, "websockets need HTTP/1.1"};
    }
    std::unique_ptr<websocket> ws(new websocket);
    ws->m_on = std::move(on);
    h2o_req_t* req = exchange.take_for_upgrade();
    if (req == nullptr) {
        return error{errc::unavailable, "the client went away"};
    }
    if (!subprotocol.empty()) {
        h2o_add_header_by_str(&req->pool, &req->res.headers, H2O_STRLIT("sec-websocket-protocol"),
                              0, nullptr,
                              h2o_strdup(&req->pool, subprotocol.data(), subprotocol.size()).base,
                              subprotocol.size());
    }
    // H2O reads the key from the request's own header storage, which lives as long as the request.
    const ssize_t at = h2o_find_header_by_str(&req->headers, H2O_STRLIT("sec-websocket-key"), -1);
    ws->m_conn = h2o_upgrade_to_websocket(req, req->headers.entries[at].value.base, ws.get(),
                                          &websocket::on_event);
    wslay_event_config_set_max_recv_msg_length(ws->m_conn->ws_ctx, max_message);
    return ws;
}

websocket::~websocket() {
    if (m_conn != nullptr) {
        h2o_websocket_close(m_conn);
    }
}

void websocket::on_event(h2o_websocket_conn_t* conn, const wslay_event_on_msg_recv_arg* arg) {
    auto* self = static_cast<websocket*>(conn->data);
    if (arg == nullptr) {
        // Closed by the peer, a network error, a protocol error or the upgrade failing: H2O is
        // done with the connection and we free it now (it may be inside its own callback).
        h2o_websocket_close(conn);
        self->m_conn = nullptr;
        self->closed();
        return;
    }
    if (wslay_is_ctrl_frame(arg->opcode) != 0) {
        return; // pings are answered by wslay; a close frame ends in the arg == nullptr call
    }
    if (self->m_on.on_message) {
        self->m_in_callback = true;
        self->m_on.on_message(
            std::string_view(reinterpret_cast<const char*>(arg->msg), arg->msg_length),
            arg->opcode == WSLAY_BINARY_FRAME);
        self->m_in_callback = false;
    }
}

void websocket::closed() {
    if (m_closed) {
        return;
    }
    m_closed = true;
    if (m_on.on_close) {
        m_on.on_close();
    }
}

void websocket::flush() {
    // Inside H2O's own loop over wslay (a message callback) the queue is sent when that returns.
    // Before the 101 is out H2O has no socket for it yet; it sends the queue once it has.
    if (m_conn != nullptr && m_conn->sock != nullptr && !m_in_callback) {
        h2o_websocket_proceed(m_conn); // may end in on_event(nullptr)
    }
}

void websocket::send(std::string_view data, bool binary) {
    if (!is_open()) {
        return;
    }
    // What a client has not read yet stays queued here; past this it is too slow to serve.
    constexpr std::size_t max_queued = 256u << 20;
    if (wslay_event_get_queued_msg_length(m_conn->ws_ctx) > max_queued) {
        close(1008);
        return;
    }
    wslay_event_msg msg{static_cast<std::uint8_t>(binary ? WSLAY_BINARY_FRAME : WSLAY_TEXT_FRAME),
                        reinterpret_cast<const std::uint8_t*>(data.data()), data.size()};
    if (wslay_event_queue_msg(m_conn->ws_ctx, &msg) != 0) {
        return;
    }
    flush();
}

void websocket::close(int code) {
    if (!is_open()) {
        return;
    }
    wslay_event_queue_close(m_conn->ws_ctx, static_cast<std::uint16_t>(code), nullptr, 0);
    flush();
}

} // namespace kpool::serve
