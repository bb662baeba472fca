// libFuzzer target: kpool serve's decisions on arbitrary requests. The bytes are a request as
// the HTTP layer hands it over: "METHOD PATH[?QUERY]\n" then an optional "AUTH\n" line, then the
// body. Checked besides crashes and sanitizer reports: every immediate answer is a JSON error
// object with a status kpool serve documents, and what is routed to work is well formed. The
// body also goes through the kernel websocket's decoders (ws_frames): whatever decodes encodes
// again, and the v1 format gives back exactly what it was given.
#include "serve/routing.hpp"
#include "serve/ws_frames.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <set>
#include <string>
#include <string_view>

namespace {

void check(bool ok) {
    if (!ok) {
        std::abort();
    }
}

std::string_view next_line(std::string_view& rest) {
    const auto end = rest.find('\n');
    const std::string_view line = rest.substr(0, end);
    rest = end == std::string_view::npos ? std::string_view() : rest.substr(end + 1);
    return line;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace kpool::serve;
    std::string_view rest(reinterpret_cast<const char*>(data), size);
    const std::string_view request_line = next_line(rest);
    const auto space = request_line.find(' ');
    const std::string_view method = request_line.substr(0, space);
    const std::string_view target = space == std::string_view::npos ? "" : request_line.substr(space + 1);
    const auto q = target.find('?');
    std::optional<std::string> auth;
    if (rest.starts_with("token ") || rest.starts_with("Bearer ")) {
        auth = std::string(next_line(rest));
    }
    request_view r{.method = method, .path = target.substr(0, q),
                   .query = q == std::string_view::npos ? "" : target.substr(q + 1), .body = rest,
                   .authorization = auth};
    static const std::set<int> documented = {400, 401, 404, 405, 503};
    for (const std::string token : {"", "s3cret"}) {
        for (const bool stopping : {false, true}) {
            const route d = decide(r, token, stopping);
            if (const auto* answer = std::get_if<http_response>(&d)) {
                check(documented.count(answer->status) == 1);
                const auto body = nlohmann::json::parse(answer->body, nullptr, false);
                check(body.is_object() && body["error"].is_string() && body["message"].is_string());
            } else if (const auto* exec = std::get_if<do_exec>(&d)) {
                check(!stopping && r.path == "/v1/exec" && r.method == "POST");
                check(exec->body.kernel.cwd.empty() || exec->body.kernel.cwd.front() == '/');
            } else if (const auto* run = std::get_if<do_run>(&d)) {
                check(!stopping && run->body.parameters.is_object());
            } else if (const auto* g = std::get_if<do_gateway>(&d)) {
                check(is_gateway_path(r.path) && !(stopping && needs_new_kernel(g->action)));
                check(g->kernel_id.find('/') == std::string::npos && g->resource.find('/') == std::string::npos);
            }
            (void)route_label(r.path);
        }
    }
    for (const auto protocol : {ws_protocol::legacy, ws_protocol::v1}) {
        for (const bool binary : {false, true}) {
            const auto message = decode_client_message(protocol, rest, binary);
            if (!message) {
                continue;
            }
            check(message->parts.size() >= 4);
            const auto legacy = encode_for_client(ws_protocol::legacy, *message);
            const auto v1 = encode_for_client(ws_protocol::v1, *message);
            check(v1.has_value() && v1->binary);
            const auto back = decode_client_message(ws_protocol::v1, v1->data, true);
            check(back && back->channel == message->channel && back->parts == message->parts);
            (void)legacy;
        }
    }
    return 0;
}
