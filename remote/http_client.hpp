// An HTTP client for kpool serve on libcurl's multi interface: many requests at once over
// keep-alive HTTP/1.1 connections (or HTTP/2 streams), driven from one thread by run_for().
// It says for each failed request whether any of it went out on a connection (`may_have_run`):
// libcurl itself sends a request again on a fresh connection when a reused one turns out dead,
// so only a request whose body was never read by libcurl is sure not to have reached a server.
#pragma once

#include <cstddef>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace kpool::remote {

struct http_request {
    std::string method = "POST";
    std::string target; // the path and query, appended to the base URL
    std::string body;
    std::vector<std::string> headers; // "Name: value", beside the client's own
    // When set, the body goes here piece by piece as it arrives (a streamed answer), not into
    // http_answer::body.
    std::function<void(std::string_view)> on_body;
};

struct http_answer {
    int status = 0;                             // 0: no answer came
    std::map<std::string, std::string> headers; // names in lower case
    std::string body;
    std::string failure;       // libcurl's words when no answer came
    bool may_have_run = false; // some of the request went out on a connection
    // No request can get through, this one's or another's: the certificate is not trusted, the
    // host has no address, the URL is wrong. Not worth sending again.
    bool hopeless = false;
    double seconds = 0; // from the send to the last byte
    std::size_t bytes_sent = 0;
    std::size_t bytes_received = 0;

    // A header holding a number of seconds or milliseconds (Retry-After, Kpool-Queued-Ms): -1
    // when absent or not a plain non-negative number (an HTTP date: the caller's own wait).
    double number(const std::string& header) const;
};

// The time on a monotonic clock, in seconds: the feed policy's clock.
double monotonic_seconds();

struct client_settings {
    std::string
        base_url;       // http(s)://host:port (and a proxy's path prefix), without a trailing slash
    std::string token;  // sent as `Authorization: token T` when not empty
    std::string cacert; // a PEM file of trusted CAs (a self-signed certificate's own)
    bool http2 = false; // HTTP/2 by ALPN (https only: kpool serve has no cleartext HTTP/2)
    long connect_timeout_ms = 10000;
};

class http_client {
public:
    explicit http_client(client_settings settings);
    ~http_client();
    http_client(const http_client&) = delete;
    http_client& operator=(const http_client&) = delete;

    using done_fn = std::function<void(http_answer)>;
    // Queues a request; `done` is called from run_for() exactly once.
    void send(http_request request, done_fn done);
    // Moves the transfers on for up to `timeout_ms`, calling `done` for those that ended;
    // returns sooner when one ends or wake() is called.
    void run_for(int timeout_ms);
    // From any thread: makes a run_for() under way return.
    void wake();
    std::size_t in_flight() const;

private:
    struct state;
    std::unique_ptr<state> m;
};

// A base URL's form, checked: http:// or https://, a host, perhaps a path prefix (a reverse
// proxy's), no query. Empty when it is fine, else what is wrong.
std::string check_base_url(const std::string& url);

} // namespace kpool::remote
