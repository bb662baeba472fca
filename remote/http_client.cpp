// libcurl's multi interface behind http_client: one easy handle per request, RAII over both.
#include "remote/http_client.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cstring>
#include <stdexcept>

namespace kpool::remote {
namespace {

// curl_global_init once per process, before any handle; never cleaned up (other threads' libcurl
// users, if any, may still need it).
void global_init() {
    static const bool done = [] {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
            throw std::runtime_error("libcurl did not initialise");
        }
        return true;
    }();
    (void)done;
}

} // namespace

// Named, not anonymous: http_client::state (external linkage) holds them.
namespace curl_handles {

struct multi_deleter {
    void operator()(CURLM* m) const { curl_multi_cleanup(m); }
};
struct easy_deleter {
    void operator()(CURL* e) const { curl_easy_cleanup(e); }
};
struct slist_deleter {
    void operator()(curl_slist* l) const { curl_slist_free_all(l); }
};

// One request under way: its handle, what it sends, what came back.
struct transfer {
    std::unique_ptr<CURL, easy_deleter> easy;
    std::unique_ptr<curl_slist, slist_deleter> headers;
    http_request request;
    http_client::done_fn done;
    std::size_t body_at = 0;
    bool body_read =
        false; // libcurl asked for the body: a connection was up and the request going out
    http_answer answer;
};

} // namespace curl_handles

namespace {

using curl_handles::transfer;

std::size_t on_body_chunk(char* data, std::size_t size, std::size_t n, void* user) {
    auto* t = static_cast<transfer*>(user);
    if (t->request.on_body) {
        long status = 0; // only a 200's body is a stream; an error's is one JSON answer
        curl_easy_getinfo(t->easy.get(), CURLINFO_RESPONSE_CODE, &status);
        if (status == 200) {
            t->answer.bytes_received += size * n;
            t->request.on_body(std::string_view(data, size * n));
            return size * n;
        }
    }
    t->answer.body.append(data, size * n);
    return size * n;
}

std::size_t on_header_line(char* data, std::size_t size, std::size_t n, void* user) {
    auto* t = static_cast<transfer*>(user);
    std::string line(data, size * n);
    const auto colon = line.find(':');
    if (line.starts_with("HTTP/")) {
        t->answer.headers.clear(); // a new response (after a 100 Continue, or a retried request)
    } else if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        std::transform(name.begin(), name.end(), name.begin(),
                       [](unsigned char c) { return std::tolower(c); });
        std::string value = line.substr(colon + 1);
        const auto first = value.find_first_not_of(" \t");
        const auto last = value.find_last_not_of(" \t\r\n");
        t->answer.headers[name] =
            first == std::string::npos ? "" : value.substr(first, last - first + 1);
    }
    return size * n;
}

std::size_t on_body_wanted(char* buffer, std::size_t size, std::size_t n, void* user) {
    auto* t = static_cast<transfer*>(user);
    t->body_read = true;
    const std::size_t count = std::min(size * n, t->request.body.size() - t->body_at);
    std::memcpy(buffer, t->request.body.data() + t->body_at, count);
    t->body_at += count;
    return count;
}

// libcurl rewinds the body to send the request again on a fresh connection: allowed, and the
// attempt before counts as sent (body_read stays set).
int on_rewind(void* user, curl_off_t offset, int origin) {
    auto* t = static_cast<transfer*>(user);
    if (origin != SEEK_SET || offset < 0 ||
        static_cast<std::size_t>(offset) > t->request.body.size()) {
        return CURL_SEEKFUNC_CANTSEEK;
    }
    t->body_at = static_cast<std::size_t>(offset);
    return CURL_SEEKFUNC_OK;
}

// Failures that say something about the server's address or its certificate, not about this
// moment: every other request would fail the same way.
bool is_hopeless(CURLcode code) {
    switch (code) {
    case CURLE_UNSUPPORTED_PROTOCOL:
    case CURLE_URL_MALFORMAT:
    case CURLE_COULDNT_RESOLVE_HOST:
    case CURLE_PEER_FAILED_VERIFICATION:
    case CURLE_SSL_CONNECT_ERROR:
    case CURLE_SSL_CERTPROBLEM:
    case CURLE_SSL_CIPHER:
    case CURLE_SSL_CACERT_BADFILE:
    case CURLE_SSL_ISSUER_ERROR:
    case CURLE_SSL_PINNEDPUBKEYNOTMATCH:
    case CURLE_SSL_INVALIDCERTSTATUS:
    case CURLE_HTTP2:
    case CURLE_WEIRD_SERVER_REPLY: return true;
    default: return false;
    }
}

} // namespace

struct http_client::state {
    client_settings settings;
    std::unique_ptr<CURLM, curl_handles::multi_deleter> multi;
    std::vector<std::unique_ptr<curl_handles::transfer>> transfers;
};

http_client::http_client(client_settings settings) : m(std::make_unique<state>()) {
    global_init();
    m->settings = std::move(settings);
    m->multi.reset(curl_multi_init());
    if (!m->multi) {
        throw std::runtime_error("libcurl: no multi handle");
    }
    // HTTP/2: the requests of one host share one connection's streams (libcurl's default since
    // 7.62, said here because the rate depends on it).
    curl_multi_setopt(m->multi.get(), CURLMOPT_PIPELINING, CURLPIPE_MULTIPLEX);
}

http_client::~http_client() {
    for (auto& t : m->transfers) {
        curl_multi_remove_handle(m->multi.get(), t->easy.get());
    }
}

void http_client::send(http_request request, done_fn done) {
    auto t = std::make_unique<curl_handles::transfer>();
    t->easy.reset(curl_easy_init());
    if (!t->easy) {
        http_answer failed;
        failed.failure = "libcurl: no easy handle";
        return done(std::move(failed));
    }
    t->request = std::move(request);
    t->done = std::move(done);
    CURL* e = t->easy.get();
    const std::string url = m->settings.base_url + t->request.target;
    curl_easy_setopt(e, CURLOPT_URL, url.c_str());
    curl_easy_setopt(e, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(e, CURLOPT_CONNECTTIMEOUT_MS, m->settings.connect_timeout_ms);
    curl_easy_setopt(e, CURLOPT_TCP_NODELAY, 1L);
    curl_easy_setopt(e, CURLOPT_HTTP_VERSION,
                     m->settings.http2 ? CURL_HTTP_VERSION_2TLS : CURL_HTTP_VERSION_1_1);
    curl_easy_setopt(e, CURLOPT_PIPEWAIT, m->settings.http2 ? 1L : 0L);
    if (!m->settings.cacert.empty()) {
        curl_easy_setopt(e, CURLOPT_CAINFO, m->settings.cacert.c_str());
    }
    curl_slist* list = nullptr;
    auto add = [&list](const std::string& h) {
        if (curl_slist* grown = curl_slist_append(list, h.c_str())) {
            list = grown;
        }
    };
    add("Expect:"); // no 100-continue round trip before a big body
    if (!m->settings.token.empty()) {
        add("Authorization: token " + m->settings.token);
    }
    for (const std::string& h : t->request.headers) {
        add(h);
    }
    if (t->request.method == "POST") {
        add("Content-Type: application/json");
        curl_easy_setopt(e, CURLOPT_POST, 1L);
        curl_easy_setopt(e, CURLOPT_POSTFIELDSIZE_LARGE,
                         static_cast<curl_off_t>(t->request.body.size()));
        curl_easy_setopt(e, CURLOPT_READFUNCTION, on_body_wanted);
        curl_easy_setopt(e, CURLOPT_READDATA, t.get());
        curl_easy_setopt(e, CURLOPT_SEEKFUNCTION, on_rewind);
        curl_easy_setopt(e, CURLOPT_SEEKDATA, t.get());
    } else if (t->request.method != "GET") {
        curl_easy_setopt(e, CURLOPT_CUSTOMREQUEST, t->request.method.c_str());
    }
    t->headers.reset(list);
    curl_easy_setopt(e, CURLOPT_HTTPHEADER, list);
    curl_easy_setopt(e, CURLOPT_WRITEFUNCTION, on_body_chunk);
    curl_easy_setopt(e, CURLOPT_WRITEDATA, t.get());
    curl_easy_setopt(e, CURLOPT_HEADERFUNCTION, on_header_line);
    curl_easy_setopt(e, CURLOPT_HEADERDATA, t.get());
    curl_easy_setopt(e, CURLOPT_PRIVATE, t.get());
    if (curl_multi_add_handle(m->multi.get(), e) != CURLM_OK) {
        http_answer failed;
        failed.failure = "libcurl: cannot add the request";
        return t->done(std::move(failed));
    }
    m->transfers.push_back(std::move(t));
}

void http_client::run_for(int timeout_ms) {
    int running = 0;
    curl_multi_perform(m->multi.get(), &running);
    // Wait only when nothing ended in that step (then the callers act on it at once).
    int queued = 0;
    CURLMsg* msg = curl_multi_info_read(m->multi.get(), &queued);
    if (msg == nullptr) {
        curl_multi_poll(m->multi.get(), nullptr, 0, std::max(0, timeout_ms), nullptr);
        curl_multi_perform(m->multi.get(), &running);
        msg = curl_multi_info_read(m->multi.get(), &queued);
    }
    std::vector<std::unique_ptr<transfer>> ended;
    for (; msg != nullptr; msg = curl_multi_info_read(m->multi.get(), &queued)) {
        if (msg->msg != CURLMSG_DONE) {
            continue;
        }
        transfer* t = nullptr;
        curl_easy_getinfo(msg->easy_handle, CURLINFO_PRIVATE, &t);
        const CURLcode code = msg->data.result;
        curl_multi_remove_handle(m->multi.get(), msg->easy_handle);
        http_answer& a = t->answer;
        if (code == CURLE_OK) {
            long status = 0;
            curl_easy_getinfo(t->easy.get(), CURLINFO_RESPONSE_CODE, &status);
            a.status = static_cast<int>(status);
        } else {
            a.status = 0; // a status line without the whole answer is no answer
            a.failure = curl_easy_strerror(code);
            a.hopeless = is_hopeless(code);
        }
        a.may_have_run = t->body_read;
        double total = 0;
        curl_easy_getinfo(t->easy.get(), CURLINFO_TOTAL_TIME, &total);
        a.seconds = total;
        curl_off_t up = 0;
        curl_easy_getinfo(t->easy.get(), CURLINFO_SIZE_UPLOAD_T, &up);
        long header_bytes = 0;
        curl_easy_getinfo(t->easy.get(), CURLINFO_HEADER_SIZE, &header_bytes);
        long request_bytes = 0;
        curl_easy_getinfo(t->easy.get(), CURLINFO_REQUEST_SIZE, &request_bytes);
        a.bytes_sent = static_cast<std::size_t>(up) + static_cast<std::size_t>(request_bytes);
        a.bytes_received += a.body.size() + static_cast<std::size_t>(header_bytes);
        auto it = std::find_if(m->transfers.begin(), m->transfers.end(),
                               [t](const auto& p) { return p.get() == t; });
        ended.push_back(std::move(*it));
        m->transfers.erase(it);
    }
    // Called after the bookkeeping: a `done` may send again.
    for (auto& t : ended) {
        t->done(std::move(t->answer));
    }
}

void http_client::wake() { curl_multi_wakeup(m->multi.get()); }

std::size_t http_client::in_flight() const { return m->transfers.size(); }

double http_answer::number(const std::string& header) const {
    const auto it = headers.find(header);
    if (it == headers.end()) {
        return -1;
    }
    try {
        std::size_t used = 0;
        const double v = std::stod(it->second, &used);
        return used == it->second.size() && v >= 0 ? v : -1;
    } catch (const std::exception&) {
        return -1;
    }
}

double monotonic_seconds() {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

std::string check_base_url(const std::string& url) {
    const bool tls = url.starts_with("https://");
    if (!tls && !url.starts_with("http://")) {
        return "must start with http:// or https://";
    }
    const std::string rest = url.substr(tls ? 8 : 7);
    if (rest.empty() || rest.front() == '/' || rest.find_first_of("?#") != std::string::npos) {
        return "names no host (http://HOST:PORT, or behind a proxy http://HOST/PREFIX)";
    }
    return "";
}

} // namespace kpool::remote
