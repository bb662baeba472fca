// An HTTP answer as kpool serve builds it, before the HTTP layer sends it: status, type, body,
// extra headers. The JSON error answer every failed request gets ({"error", "message"}).
#pragma once

#include "protocol/python_json.hpp"
#include "protocol/result.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <utility>
#include <vector>

namespace kpool::serve {

struct http_response {
    int status = 200;
    std::string content_type = "application/json";
    std::string body;
    std::vector<std::pair<std::string, std::string>> headers; // lower-case names
};

inline http_response json_response(int status, const nlohmann::json& body) {
    return {status, "application/json", protocol::to_json_text(body), {}};
}

inline http_response error_response(int status, const std::string& code, const std::string& message,
                                    nlohmann::json extra = nlohmann::json::object()) {
    nlohmann::json body = {{"error", code}, {"message", message}};
    body.update(extra);
    return json_response(status, body);
}

// 429: no kernel for this request now; come back in `retry_after_s` (the caller's turn).
inline http_response overloaded_response(const std::string& message, int retry_after_s) {
    http_response r = error_response(429, "overloaded", message);
    r.headers.emplace_back("retry-after", std::to_string(retry_after_s));
    return r;
}

// How the user's code ended, on every answer whose code ran to its end: "ok" or "error" (it
// raised). Such an answer is a 200 either way (docs/serve.md): the status is about the request,
// this header and the body's `status` about the code.
inline http_response with_outcome(http_response response, const char* outcome) {
    response.headers.emplace_back("kpool-outcome", outcome);
    return response;
}

// What a request that would run code or start a kernel gets while kpool serve is stopping.
inline http_response stopping_response() {
    return error_response(503, "unavailable", "kpool serve is stopping");
}

// kpoold's failed acquire as an answer: no kernel in time, none can start or the pool is failing
// are back-pressure (429 with Retry-After); an unknown pool is 404; a cwd/env the kernel refused
// is 400; a stopping daemon 503.
http_response acquire_refusal(const error& refused, int retry_after_s);
// kpoold's failed context op (cwd/env on a held kernel) as an answer, as an acquire's cwd/env:
// a directory that is not there is the caller's mistake (400); a kernel gone, 502 kernel_died;
// anything else the kernel's or kpoold's (502).
http_response context_refusal(const error& refused);

} // namespace kpool::serve
