// http_server: H2O's HTTP/1.1 (keep-alive, pipelining, chunked bodies) over connections our own
// uv_tcp_t listener accepts, answering through http_exchange.
#include "serve/http_server.hpp"

#include "loop/logging.hpp"
#include "protocol/hmac.hpp"
#include "protocol/text.hpp"

#define H2O_USE_LIBUV 1
#include <h2o.h>
#include <h2o/socket/uv-binding.h>
#include <openssl/err.h>
#include <openssl/ssl.h>

#include <poll.h>
#include <sys/socket.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <new>
#include <set>

namespace kpool::serve {

// Lives in the request's memory pool: when H2O disposes of the request (answer sent, or the
// connection closed first) the exchange learns that its request is gone.
struct exchange_link {
    std::weak_ptr<http_exchange> exchange;

    static void dispose(void* p) {
        auto* link = static_cast<exchange_link*>(p);
        if (auto ex = link->exchange.lock()) {
            ex->m_req = nullptr;
        }
        link->~exchange_link();
    }
};

namespace {

std::string as_string(h2o_iovec_t v) {
    return v.base != nullptr ? std::string(v.base, v.len) : std::string();
}

// Where H2O's errordoc filter sends its own 413s (see http_server::start).
constexpr std::string_view too_large_path = "/.kpool/413";

h2o_iovec_t pool_copy(h2o_req_t* req, std::string_view s) {
    return h2o_strdup(&req->pool, s.data(), s.size());
}

} // namespace

http_exchange::http_exchange(h2o_req_t* req, int fd) : m_req(req), m_fd(fd) {
    m_method = as_string(req->method);
    m_path = as_string(req->path_normalized);
    const std::string received = as_string(req->input.path).substr(0, req->input.query_at);
    if (m_path == too_large_path && received != too_large_path) {
        // H2O's internal redirect for its 413 (see http_server::start): seen as the request that
        // caused it, without its body.
        m_body_too_large = true;
        m_method = as_string(req->input.method);
        m_path = received;
    } else {
        if (req->query_at != SIZE_MAX && req->query_at < req->path.len) {
            m_query.assign(req->path.base + req->query_at + 1, req->path.len - req->query_at - 1);
        }
        m_body = as_string(req->entity);
    }
    m_authority =
        as_string(req->input.authority); // as sent: H2O's 413 redirect rewrites req->authority
    m_upgrade = as_string(req->upgrade);
    m_header_bytes = m_authority.size() + m_upgrade.size();
    for (std::size_t i = 0; i != req->headers.size; ++i) {
        m_header_bytes += req->headers.entries[i].name->len + req->headers.entries[i].value.len;
    }
    m_http1 = req->version < 0x200;
    // The caller's X-Request-Id when it is a plain name (it names a file under --save-dir and
    // goes into the log), else a fresh one.
    const ssize_t id = h2o_find_header_by_str(&req->headers, H2O_STRLIT("x-request-id"), -1);
    const std::string given = id >= 0 ? as_string(req->headers.entries[id].value) : std::string();
    const bool plain =
        !given.empty() && given.size() <= 128 && given.front() != '.' &&
        std::all_of(given.begin(), given.end(), [](char c) {
            return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
        });
    m_request_id = plain ? given : protocol::random_hex(8);
}

http_exchange::~http_exchange() {
    if (!m_answered && m_req != nullptr) {
        respond({500,
                 "application/json",
                 R"({"error":"internal","message":"the request was dropped without an answer"})",
                 {}});
    }
}

bool http_exchange::gone() const {
    if (m_req == nullptr) {
        return true;
    }
    // H2O reads nothing more from an HTTP/1 connection while its request is being answered, so
    // a hang-up shows only on the socket itself.
    pollfd p{m_fd, POLLRDHUP, 0};
    return m_fd >= 0 && ::poll(&p, 1, 0) == 1 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) != 0;
}

std::optional<std::string> http_exchange::header(std::string_view name) const {
    if (m_req == nullptr) {
        return std::nullopt;
    }
    const ssize_t at = h2o_find_header_by_str(&m_req->headers, name.data(), name.size(), -1);
    if (at < 0) {
        return std::nullopt;
    }
    return as_string(m_req->headers.entries[at].value);
}

void http_exchange::log_access(int status) const {
    loop::logger("access")->info(
        "{} {} {} {:.1f}ms kernel={} request={}", protocol::echo_safe(m_method),
        protocol::echo_safe(m_path), status,
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - m_arrived)
            .count(),
        m_kernel_id.empty() ? "-" : m_kernel_id, m_request_id);
}

st_h2o_req_t* http_exchange::take_for_upgrade() {
    if (m_answered || m_req == nullptr) {
        return nullptr;
    }
    m_answered = true;
    log_access(101);
    return m_req;
}

void http_exchange::add_response_headers(std::vector<std::pair<std::string, std::string>> headers,
                                         const std::string& type) {
    headers.insert(headers.end(), m_extra_headers.begin(), m_extra_headers.end());
    headers.emplace_back("x-request-id", m_request_id);
    h2o_req_t* req = m_req;
    const h2o_iovec_t t = pool_copy(req, type);
    h2o_add_header(&req->pool, &req->res.headers, H2O_TOKEN_CONTENT_TYPE, nullptr, t.base, t.len);
    for (const auto& [name, value] : headers) {
        const h2o_iovec_t n = pool_copy(req, name);
        const h2o_iovec_t v = pool_copy(req, value);
        h2o_add_header_by_str(&req->pool, &req->res.headers, n.base, n.len, 1, nullptr, v.base,
                              v.len);
    }
}

void http_exchange::respond(http_response response) {
    if (m_answered) {
        return;
    }
    m_answered = true;
    log_access(response.status);
    if (m_streaming) {
        m_waiting += response.body;
        m_stream_done = true;
        return flush();
    }
    if (m_req == nullptr) {
        return; // the client went away
    }
    h2o_req_t* req = m_req;
    req->res.status = response.status;
    req->res.reason = reason_phrase(response.status);
    add_response_headers(std::move(response.headers), response.content_type);
    h2o_send_inline(req, response.body.data(), response.body.size()); // copies the body
}

// Lives in the request's memory pool, as exchange_link: H2O asks it for the stream's next batch.
struct stream_generator {
    h2o_generator_t super; // first: H2O hands us this pointer
    std::weak_ptr<http_exchange> exchange;

    static void proceed(h2o_generator_t* self, h2o_req_t*) {
        if (auto ex = reinterpret_cast<stream_generator*>(self)->exchange.lock()) {
            ex->m_sending = false;
            ex->m_in_h2o.clear();
            ex->flush();
        }
    }
    // The response is cut short (the client went away): nothing more may be sent on it.
    static void stop(h2o_generator_t* self, h2o_req_t*) {
        if (auto ex = reinterpret_cast<stream_generator*>(self)->exchange.lock()) {
            ex->m_req = nullptr;
        }
    }
    static void dispose(void* p) { static_cast<stream_generator*>(p)->~stream_generator(); }
};

void http_exchange::start_stream(int status, const std::string& content_type,
                                 std::vector<std::pair<std::string, std::string>> headers) {
    if (m_answered || m_streaming || m_req == nullptr) {
        return;
    }
    m_streaming = true;
    h2o_req_t* req = m_req;
    req->res.status = status;
    req->res.reason = reason_phrase(status);
    add_response_headers(std::move(headers), content_type);
    void* mem =
        h2o_mem_alloc_shared(&req->pool, sizeof(stream_generator), &stream_generator::dispose);
    auto* generator = new (mem)
        stream_generator{{&stream_generator::proceed, &stream_generator::stop}, weak_from_this()};
    h2o_start_response(req, &generator->super);
    // The head goes at once, with what is there (nothing yet): a client sees the 200 now.
    m_sending = true;
    h2o_send(req, nullptr, 0, H2O_SEND_STATE_IN_PROGRESS);
}

void http_exchange::stream(std::string piece) {
    if (!m_streaming || m_stream_done) {
        return;
    }
    m_waiting += piece;
    flush();
}

void http_exchange::flush() {
    if (m_sending || m_req == nullptr || (m_waiting.empty() && !m_stream_done)) {
        return;
    }
    m_in_h2o = std::move(m_waiting);
    m_waiting.clear();
    h2o_iovec_t buf = h2o_iovec_init(m_in_h2o.data(), m_in_h2o.size());
    m_sending = true; // until H2O asks for more (proceed), which it never does after the last
    h2o_send(m_req, &buf, 1, m_stream_done ? H2O_SEND_STATE_FINAL : H2O_SEND_STATE_IN_PROGRESS);
}

struct http_server::state {
    uv_loop_t* loop = nullptr;
    h2o_globalconf_t config{};
    h2o_context_t context{};
    h2o_accept_ctx_t accept{};
    uv_tcp_t* listener = nullptr; // freed by its close callback
    handler on_request;
    bool context_ready = false;
    std::set<uv_tcp_t*> connections; // accepted, not yet closed
    std::size_t max_connections = 1024;
    bool accept_waiting = false; // a connection waits in the backlog for one of these to close
    std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> tls{nullptr, &SSL_CTX_free};
};

namespace {

struct route_handler {
    h2o_handler_t super; // first: H2O hands us this pointer
    http_server::handler* on_request;
    const http_server::state* owner;
};

bool same_address(const sockaddr_storage& a, const sockaddr_storage& b) {
    if (a.ss_family != b.ss_family) {
        return false;
    }
    if (a.ss_family == AF_INET) {
        const auto& x = reinterpret_cast<const sockaddr_in&>(a);
        const auto& y = reinterpret_cast<const sockaddr_in&>(b);
        return x.sin_port == y.sin_port && x.sin_addr.s_addr == y.sin_addr.s_addr;
    }
    const auto& x = reinterpret_cast<const sockaddr_in6&>(a);
    const auto& y = reinterpret_cast<const sockaddr_in6&>(b);
    return x.sin6_port == y.sin6_port &&
           std::memcmp(&x.sin6_addr, &y.sin6_addr, sizeof x.sin6_addr) == 0;
}

// The socket of the connection `req` came on: the one whose peer is the request's peer.
int socket_of(const http_server::state& s, h2o_req_t* req) {
    sockaddr_storage peer{};
    if (req->conn->callbacks->get_peername(req->conn, reinterpret_cast<sockaddr*>(&peer)) == 0) {
        return -1;
    }
    for (uv_tcp_t* tcp : s.connections) {
        sockaddr_storage other{};
        int len = sizeof other;
        uv_os_fd_t fd = -1;
        if (uv_tcp_getpeername(tcp, reinterpret_cast<sockaddr*>(&other), &len) == 0 &&
            same_address(peer, other) && uv_fileno(reinterpret_cast<uv_handle_t*>(tcp), &fd) == 0) {
            return fd;
        }
    }
    return -1;
}

int on_req(h2o_handler_t* self, h2o_req_t* req) {
    auto* route = reinterpret_cast<route_handler*>(self);
    auto exchange = std::make_shared<http_exchange>(req, socket_of(*route->owner, req));
    void* mem = h2o_mem_alloc_shared(&req->pool, sizeof(exchange_link), &exchange_link::dispose);
    new (mem) exchange_link{exchange};
    (*route->on_request)(std::move(exchange));
    return 0;
}

void free_tcp(uv_handle_t* handle) { delete reinterpret_cast<uv_tcp_t*>(handle); }

// A connection's handle; H2O owns its `data` field, so the server is found through this.
struct connection {
    uv_tcp_t tcp; // first: the handle pointer is this object's pointer
    http_server::state* owner;
};

void accept_one(http_server::state* s);

void free_connection(uv_handle_t* handle) {
    auto* c = reinterpret_cast<connection*>(handle);
    http_server::state* s = c->owner;
    s->connections.erase(&c->tcp);
    delete c;
    if (s->accept_waiting && s->listener != nullptr) {
        s->accept_waiting = false;
        accept_one(s);
    }
}

void on_connection(uv_stream_t* listener, int status) {
    if (status != 0) {
        return;
    }
    auto* s = static_cast<http_server::state*>(listener->data);
    if (s->connections.size() >= s->max_connections) {
        // Not accepted: libuv stops watching the listener until the next uv_accept, so the
        // client waits in the kernel's backlog until a connection closes (free_connection).
        s->accept_waiting = true;
        return;
    }
    accept_one(s);
}

void accept_one(http_server::state* s) {
    uv_stream_t* listener = reinterpret_cast<uv_stream_t*>(s->listener);
    auto* conn = new connection{{}, s};
    s->connections.insert(&conn->tcp);
    uv_tcp_init(listener->loop, &conn->tcp);
    if (uv_accept(listener, reinterpret_cast<uv_stream_t*>(&conn->tcp)) != 0) {
        uv_close(reinterpret_cast<uv_handle_t*>(&conn->tcp), free_connection);
        return;
    }
    uv_tcp_nodelay(&conn->tcp, 1);
    h2o_socket_t* sock =
        h2o_uv_socket_create(reinterpret_cast<uv_stream_t*>(&conn->tcp), free_connection);
    h2o_accept(&s->accept, sock);
}

// H2O 2.2's errordoc filter has no dispose, so its list and URLs (copied to the heap) outlive the
// configuration; this is its layout (lib/handler/errordoc.c), to free them with it.
struct errordoc_filter {
    h2o_filter_t super;
    H2O_VECTOR(h2o_errordoc_t) errordocs;
};

void dispose_errordoc(h2o_filter_t* self) {
    auto* f = reinterpret_cast<errordoc_filter*>(self);
    for (std::size_t i = 0; i != f->errordocs.size; ++i) {
        std::free(f->errordocs.entries[i].url.base);
    }
    std::free(f->errordocs.entries);
}

// OpenSSL's last error, as text.
std::string openssl_error() {
    char text[256] = "unknown error";
    if (const unsigned long e = ERR_get_error(); e != 0) {
        ERR_error_string_n(e, text, sizeof text);
    }
    return text;
}

result<SSL_CTX*> tls_context(const std::string& cert_file, const std::string& key_file) {
    if (cert_file.empty() || key_file.empty()) {
        return error{errc::bad_request,
                     "TLS needs both a certificate (--cert) and its key (--key)"};
    }
    std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_server_method()),
                                                          &SSL_CTX_free);
    if (!ctx) {
        return error{errc::internal, "TLS: " + openssl_error()};
    }
    SSL_CTX_set_min_proto_version(ctx.get(), TLS1_2_VERSION);
    SSL_CTX_set_options(ctx.get(), SSL_OP_NO_COMPRESSION | SSL_OP_NO_RENEGOTIATION);
    if (SSL_CTX_use_certificate_chain_file(ctx.get(), cert_file.c_str()) != 1) {
        return error{errc::bad_request,
                     "cannot use the certificate " + cert_file + ": " + openssl_error()};
    }
    if (SSL_CTX_use_PrivateKey_file(ctx.get(), key_file.c_str(), SSL_FILETYPE_PEM) != 1) {
        return error{errc::bad_request, "cannot use the key " + key_file + ": " + openssl_error()};
    }
    if (SSL_CTX_check_private_key(ctx.get()) != 1) {
        return error{errc::bad_request,
                     "the key " + key_file + " does not match the certificate " + cert_file};
    }
    h2o_ssl_register_alpn_protocols(ctx.get(), h2o_http2_alpn_protocols);
    return ctx.release();
}

} // namespace

result<std::unique_ptr<http_server>>
http_server::start(uv_loop_t* loop, const http_server_options& options, handler on_request) {
    std::unique_ptr<http_server> server(new http_server);
    server->m_state = std::make_unique<state>();
    state& s = *server->m_state;
    s.loop = loop;
    s.on_request = std::move(on_request);

    sockaddr_storage addr{};
    if (uv_ip4_addr(options.host.c_str(), options.port, reinterpret_cast<sockaddr_in*>(&addr)) !=
            0 &&
        uv_ip6_addr(options.host.c_str(), options.port, reinterpret_cast<sockaddr_in6*>(&addr)) !=
            0) {
        return error{errc::bad_request, "'" + options.host + "' is not an IPv4 or IPv6 address"};
    }
    h2o_config_init(&s.config);
    s.config.max_request_entity_size = options.max_body;
    s.max_connections = std::max<std::size_t>(1, options.max_connections);
    // H2O gives a request without a Host header (HTTP/1.0; never a browser's) this host's name
    // as its authority: localhost, the only host such a request can mean.
    h2o_hostconf_t* host =
        h2o_config_register_host(&s.config, h2o_iovec_init(H2O_STRLIT("localhost")), 65535);
    // H2O answers a body over the limit itself, before any handler, in plain text; its errordoc
    // filter turns that answer into an internal request for too_large_path, which reaches the
    // handler as the original request with body_too_large() (the filter keeps the status 413).
    h2o_errordoc_t too_large{413, h2o_iovec_init(too_large_path.data(), too_large_path.size())};
    h2o_pathconf_t& fallback = host->fallback_path;
    const std::vector<h2o_filter_t*> before(fallback.filters.entries,
                                            fallback.filters.entries + fallback.filters.size);
    h2o_errordoc_register(&fallback, &too_large, 1);
    for (std::size_t i = 0; i != fallback.filters.size; ++i) { // the new one (H2O prepends filters)
        if (std::find(before.begin(), before.end(), fallback.filters.entries[i]) == before.end()) {
            fallback.filters.entries[i]->dispose = dispose_errordoc;
        }
    }
    h2o_pathconf_t* path = h2o_config_register_path(host, "/", 0);
    auto* route = reinterpret_cast<route_handler*>(h2o_create_handler(path, sizeof(route_handler)));
    route->super.on_req = on_req;
    route->on_request = &s.on_request;
    route->owner = &s;
    h2o_context_init(&s.context, loop, &s.config);
    s.context_ready = true;
    s.accept.ctx = &s.context;
    s.accept.hosts = s.config.hosts;
    if (!options.cert_file.empty() || !options.key_file.empty()) {
        auto tls = tls_context(options.cert_file, options.key_file);
        if (!tls) {
            return tls.err();
        }
        s.tls.reset(*tls);
        s.accept.ssl_ctx = s.tls.get();
    }

    s.listener = new uv_tcp_t;
    uv_tcp_init(loop, s.listener);
    s.listener->data = &s;
    int rc = uv_tcp_bind(s.listener, reinterpret_cast<const sockaddr*>(&addr), 0);
    if (rc == 0) {
        rc = uv_listen(reinterpret_cast<uv_stream_t*>(s.listener), 128, on_connection);
    }
    if (rc != 0) {
        return error{errc::unavailable, "cannot listen on " + options.host + ":" +
                                            std::to_string(options.port) + ": " + uv_strerror(rc)};
    }
    sockaddr_storage bound{};
    int len = sizeof bound;
    uv_tcp_getsockname(s.listener, reinterpret_cast<sockaddr*>(&bound), &len);
    server->m_port =
        ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    return server;
}

void http_server::stop_listening() {
    if (m_state && m_state->listener != nullptr) {
        uv_close(reinterpret_cast<uv_handle_t*>(m_state->listener), free_tcp);
        m_state->listener = nullptr;
    }
}

void http_server::close_connections() {
    if (!m_state) {
        return;
    }
    for (uv_tcp_t* tcp : m_state->connections) {
        uv_os_fd_t fd = -1;
        if (uv_fileno(reinterpret_cast<uv_handle_t*>(tcp), &fd) == 0) {
            ::shutdown(fd, SHUT_RD); // H2O reads end-of-stream and closes the connection itself
        }
    }
}

std::size_t http_server::open_connections() const {
    return m_state ? m_state->connections.size() : 0;
}

http_server::~http_server() {
    if (!m_state) {
        return;
    }
    stop_listening();
    if (m_state->context_ready) {
        h2o_context_dispose(&m_state->context);
    }
    h2o_config_dispose(&m_state->config);
}

const char* reason_phrase(int status) {
    switch (status) {
    case 101: return "Switching Protocols";
    case 200: return "OK";
    case 201: return "Created";
    case 204: return "No Content";
    case 400: return "Bad Request";
    case 401: return "Unauthorized";
    case 403: return "Forbidden";
    case 404: return "Not Found";
    case 409: return "Conflict";
    case 405: return "Method Not Allowed";
    case 413: return "Payload Too Large";
    case 415: return "Unsupported Media Type";
    case 429: return "Too Many Requests";
    case 431: return "Request Header Fields Too Large";
    case 500: return "Internal Server Error";
    case 502: return "Bad Gateway";
    case 503: return "Service Unavailable";
    case 504: return "Gateway Timeout";
    default: return "Unknown";
    }
}

} // namespace kpool::serve
