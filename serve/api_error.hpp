// The JSON error answer every failed request gets: {"error": code, "message": text}, with the
// HTTP status that goes with it, and what kpoold's refusals become over HTTP.
#pragma once

#include "serve/http_server.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace kpool::serve {

inline http_response error_response(int status, const std::string& code, const std::string& message,
                                    nlohmann::json extra = nlohmann::json::object()) {
    nlohmann::json body = {{"error", code}, {"message", message}};
    body.update(extra);
    return {status, "application/json", body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), {}};
}

inline http_response json_response(int status, const nlohmann::json& body) {
    return {status, "application/json", body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace), {}};
}

// kpoold's failed acquire as an answer: no kernel in time, none can start or the pool is failing
// are back-pressure (429 with Retry-After); an unknown pool is 404; a cwd/env the kernel refused
// is 400; a stopping daemon 503.
http_response acquire_refusal(const nlohmann::json& error, int retry_after_s);

} // namespace kpool::serve
