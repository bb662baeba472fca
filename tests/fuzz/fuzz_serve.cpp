// libFuzzer target: kpool serve's decisions on arbitrary requests. The bytes are a request as
// the HTTP layer hands it over: "METHOD PATH[?QUERY]\n", then optional header lines "Host: ",
// "Origin: ", "Content-Type: ", "Sec-Fetch-Site: " (any order), an optional "AUTH\n" line, then
// the body. Checked besides crashes and sanitizer reports: the front door (serve/front_door.hpp)
// lets through no foreign origin, no non-loopback Host without a token and no POST body not
// declared JSON; every immediate answer is a JSON error object with a status kpool serve
// documents, and what is routed to work is well formed. The
// body also goes through the kernel websocket's decoders (ws_frames): whatever decodes encodes
// again, and the v1 format gives back exactly what it was given.
#include "serve/front_door.hpp"
#include "serve/routing.hpp"
#include "serve/ws_frames.hpp"

#include <nlohmann/json.hpp>

#include <cctype>
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

std::string lower(std::string_view s) {
    std::string out(s);
    for (char& c : out) {
        c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    return out;
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
    const std::string_view target =
        space == std::string_view::npos ? "" : request_line.substr(space + 1);
    const auto q = target.find('?');
    door_request door{.method = method,
                      .host = "",
                      .origin = {},
                      .content_type = {},
                      .sec_fetch_site = {},
                      .authorization = {}};
    for (bool more = true; more;) {
        more = false;
        for (const auto& [prefix, field] :
             {std::pair{std::string_view("Origin: "), &door.origin},
              std::pair{std::string_view("Content-Type: "), &door.content_type},
              std::pair{std::string_view("Sec-Fetch-Site: "), &door.sec_fetch_site},
              std::pair{std::string_view("Authorization: "), &door.authorization}}) {
            if (rest.starts_with(prefix)) {
                *field = std::string(next_line(rest).substr(prefix.size()));
                more = true;
            }
        }
        if (rest.starts_with("Host: ")) {
            door.host = next_line(rest).substr(6);
            more = true;
        }
    }
    for (const bool token_required : {false, true}) {
        const door_policy policy{.token_required = token_required,
                                 .tls = false,
                                 .allow_origins = {"https://ok.example"},
                                 .allow_hosts = {"devbox.test"}};
        const auto refused = check_front_door(door, policy);
        if (refused) {
            check(refused->status == 403 || refused->status == 415);
            const auto body = nlohmann::json::parse(refused->body, nullptr, false);
            check(body.is_object() && body["error"].is_string() && body["message"].is_string());
            continue;
        }
        // What passed: an allowed origin or the server's own; without a token a loopback Host or
        // the allowed name; a POST body declared JSON, or sent with a token-scheme Authorization.
        check(!door.origin || lower(*door.origin) == "https://ok.example" ||
              (!door.host.empty() && lower(*door.origin) == "http://" + lower(door.host)));
        check(token_required || door.host.empty() || is_loopback_host(door.host) ||
              lower(door.host).find("devbox.test") != std::string::npos);
        if (method == "POST" || method == "PUT" || method == "PATCH") {
            const std::string scheme = door.authorization ? lower(*door.authorization) : "";
            check((door.content_type &&
                   lower(*door.content_type).find("application/json") != std::string::npos) ||
                  scheme.find("token") != std::string::npos ||
                  scheme.find("bearer") != std::string::npos);
        }
        const auto headers = cors_headers(door, policy, {}, method == "OPTIONS", door.content_type);
        check(headers.empty() || (door.origin && headers.front().second == *door.origin));
        for (const auto& [name, value] : headers) {
            check(value.find('\n') == std::string::npos && value.find('\r') == std::string::npos);
        }
    }
    std::optional<std::string> auth;
    if (rest.starts_with("token ") || rest.starts_with("Bearer ")) {
        auth = std::string(next_line(rest));
    }
    request_view r{.method = method,
                   .path = target.substr(0, q),
                   .query = q == std::string_view::npos ? "" : target.substr(q + 1),
                   .body = rest,
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
                // While stopping, nothing that could start a kernel gets through.
                const bool starts = g->action == gateway_action::start_kernel ||
                                    g->action == gateway_action::restart_kernel ||
                                    g->action == gateway_action::channels;
                check(is_gateway_path(r.path) && !(stopping && starts));
                check(g->kernel_id.find('/') == std::string::npos &&
                      g->resource.find('/') == std::string::npos);
            } else if (const auto* s = std::get_if<do_session>(&d)) {
                const bool starts =
                    s->action == session_action::create || s->action == session_action::update;
                check(is_gateway_path(r.path) && !(stopping && starts));
                check(s->session_id.find('/') == std::string::npos);
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
