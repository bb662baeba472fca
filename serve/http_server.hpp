// kpool serve's HTTP layer: H2O (Debian's libh2o, built on libuv) on our own libuv loop, one
// listener, no thread. Every request goes to one handler as an http_exchange, which answers it
// exactly once: now, or later from any libuv callback; an exchange dropped unanswered answers
// 500 by itself, and one whose client went away ignores its answer.
#pragma once

#include "protocol/result.hpp"
#include "serve/http_response.hpp"

#include <uv.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

struct st_h2o_req_t;

namespace kpool::serve {

class http_exchange : public std::enable_shared_from_this<http_exchange> {
public:
    // `fd`: the connection's socket, to notice a client that hangs up while its answer is
    // still being made (-1: unknown).
    http_exchange(st_h2o_req_t* req, int fd);
    ~http_exchange(); // 500 if nobody answered
    http_exchange(const http_exchange&) = delete;
    http_exchange& operator=(const http_exchange&) = delete;

    std::string_view method() const { return m_method; }
    // The path with `..` and percent-encoded dots resolved (H2O's path_normalized), no query.
    std::string_view path() const { return m_path; }
    // What follows '?' in the request line, undecoded; empty when none.
    std::string_view query() const { return m_query; }
    std::string_view body() const { return m_body; }
    // The body was over http_server_options::max_body, so H2O did not read it: answer 413.
    bool body_too_large() const { return m_body_too_large; }
    // The Host header (H2O keeps it apart from the other headers).
    std::string_view authority() const { return m_authority; }
    // The Upgrade header (H2O keeps it apart too); empty when none.
    std::string_view upgrade() const { return m_upgrade; }
    // The request's headers' names and values together, in bytes.
    std::size_t header_bytes() const { return m_header_bytes; }
    // A request header by its lower-case name.
    std::optional<std::string> header(std::string_view name) const;

    // Answers; every answer carries X-Request-Id (the caller's, else a fresh one) and is
    // logged as one access line: method, path, status, milliseconds, kernel id, request id.
    // After start_stream(): `response.body` is the stream's last piece, and the stream ends
    // (the line logs `response.status`, what the answer would have been).
    void respond(http_response response);
    // Streams the answer instead: its status and headers now, then pieces as they come
    // (stream()), until respond(). H2O sends one batch at a time; what comes meanwhile waits.
    void start_stream(int status, const std::string& content_type,
                      std::vector<std::pair<std::string, std::string>> headers);
    void stream(std::string piece);
    // A header every answer to this request carries (CORS), besides the response's own.
    void add_header(std::string name, std::string value) {
        m_extra_headers.emplace_back(std::move(name), std::move(value));
    }
    const std::string& request_id() const { return m_request_id; }
    // The kernel the request ran on, for the access line.
    void set_kernel_id(std::string id) { m_kernel_id = std::move(id); }
    bool answered() const { return m_answered; }
    // The client closed the connection (or hung up its side of it): an answer would go nowhere.
    bool gone() const;
    // For a protocol upgrade (websocket): the request, which this exchange will no longer answer
    // (it is logged as 101 now); null if the client is gone or it was answered already.
    st_h2o_req_t* take_for_upgrade();
    bool is_http1() const { return m_http1; }
    // Seconds since the request arrived.
    double seconds() const {
        return std::chrono::duration<double>(std::chrono::steady_clock::now() - m_arrived).count();
    }

private:
    friend struct exchange_link;
    friend struct stream_generator;
    void log_access(int status) const;
    void add_response_headers(std::vector<std::pair<std::string, std::string>> headers,
                              const std::string& type);
    void flush(); // sends what waits, unless H2O still sends the batch before
    bool m_streaming = false;
    bool m_sending = false;     // H2O has a batch it has not asked for more after
    bool m_stream_done = false; // respond() came: the last piece is queued
    std::string m_waiting;      // pieces not handed to H2O yet
    std::string m_in_h2o;       // the batch H2O is sending (it must live until proceed)
    st_h2o_req_t* m_req;
    int m_fd;
    std::string m_method;
    std::string m_path;
    std::string m_query;
    std::string m_authority;
    std::string m_upgrade;
    std::string m_body;
    std::string m_request_id;
    std::string m_kernel_id;
    std::vector<std::pair<std::string, std::string>> m_extra_headers;
    std::chrono::steady_clock::time_point m_arrived = std::chrono::steady_clock::now();
    bool m_answered = false;
    bool m_http1 = true;
    bool m_body_too_large = false;
    std::size_t m_header_bytes = 0;
};

using exchange_ptr = std::shared_ptr<http_exchange>;

struct http_server_options {
    std::string host = "127.0.0.1";
    int port = 8890;                 // 0: any free port (port() tells which)
    std::size_t max_body = 16 << 20; // larger bodies are not read: body_too_large()
    // Open at once (websockets included); more wait in the listen backlog until one closes.
    std::size_t max_connections = 1024;
    // Both set: TLS only (HTTP/1.1, and HTTP/2 by ALPN), with this PEM certificate chain and key.
    std::string cert_file;
    std::string key_file;
};

class http_server {
public:
    using handler = std::function<void(exchange_ptr)>;

    // Binds and listens; an error says why (address in use, bad address).
    static result<std::unique_ptr<http_server>>
    start(uv_loop_t* loop, const http_server_options& options, handler on_request);
    ~http_server();
    http_server(const http_server&) = delete;
    http_server& operator=(const http_server&) = delete;

    int port() const { return m_port; }
    // Stops accepting connections.
    void stop_listening();
    // Ends every connection's reading side: H2O then closes each (after sending what it is
    // sending), through its own paths. For a stop, once every request has been answered.
    void close_connections();
    // Connections accepted and not yet closed.
    std::size_t open_connections() const;

    struct state; // H2O's configuration, context and our listener (http_server.cpp)

private:
    http_server() = default;
    std::unique_ptr<state> m_state;
    int m_port = 0;
};

// The reason phrase of an HTTP status ("Not Found").
const char* reason_phrase(int status);

} // namespace kpool::serve
