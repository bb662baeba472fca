// The Kernel Gateway API's pure parts: its routes, the kernel websocket's two message formats
// (jupyter_server's legacy JSON/binary and v1.kernel.websocket.jupyter.org), and the model's
// time format and ids.
#include "protocol/stamps.hpp"
#include "serve/gateway_kernel.hpp"
#include "serve/gateway_routes.hpp"
#include "serve/routing.hpp"
#include "serve/ws_frames.hpp"

#include <algorithm>
#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <regex>

using namespace kpool::serve;
using json = nlohmann::json;

namespace {

std::string be32(std::uint32_t v) {
    return {static_cast<char>(v >> 24), static_cast<char>(v >> 16), static_cast<char>(v >> 8),
            static_cast<char>(v)};
}

std::string le64(std::uint64_t v) {
    std::string out;
    for (int i = 0; i < 8; ++i) {
        out.push_back(static_cast<char>(v >> (8 * i)));
    }
    return out;
}

do_gateway gateway_of(std::string_view method, std::string_view path, std::string_view body = "") {
    auto d = decide_gateway(method, path, body);
    REQUIRE(std::holds_alternative<do_gateway>(d));
    return std::get<do_gateway>(d);
}

do_session session_of(std::string_view method, std::string_view path, std::string_view body = "") {
    auto d = decide_gateway(method, path, body);
    REQUIRE(std::holds_alternative<do_session>(d));
    return std::get<do_session>(d);
}

int status_of(std::string_view method, std::string_view path, std::string_view body = "") {
    auto d = decide_gateway(method, path, body);
    REQUIRE(std::holds_alternative<http_response>(d));
    return std::get<http_response>(d).status;
}

} // namespace

TEST_SUITE("gateway") {
    TEST_CASE("routes: jupyter_server's kernel and kernelspec paths, with their methods") {
        CHECK(gateway_of("GET", "/api").action == gateway_action::api_info);
        CHECK(gateway_of("GET", "/api/kernelspecs").action == gateway_action::list_kernelspecs);
        CHECK(gateway_of("GET", "/api/kernelspecs/python3").name == "python3");
        const auto res = gateway_of("GET", "/kernelspecs/python3/logo-64x64.png");
        CHECK(res.action == gateway_action::kernelspec_resource);
        CHECK(res.resource == "logo-64x64.png");
        CHECK(gateway_of("GET", "/api/kernels").action == gateway_action::list_kernels);
        const auto start = gateway_of("POST", "/api/kernels",
                                      R"({"name":"ir","env":{"KERNEL_X":"1"},"path":"a.ipynb"})");
        CHECK(start.action == gateway_action::start_kernel);
        CHECK(start.name == "ir");
        CHECK(start.env.at("KERNEL_X") == "1");
        CHECK(gateway_of("POST", "/api/kernels").name.empty()); // no body: the default kernel
        CHECK(gateway_of("DELETE", "/api/kernels/ab-cd").action == gateway_action::delete_kernel);
        CHECK(gateway_of("POST", "/api/kernels/ab-cd/restart").action ==
              gateway_action::restart_kernel);
        CHECK(gateway_of("POST", "/api/kernels/ab-cd/interrupt").kernel_id == "ab-cd");
        CHECK(gateway_of("GET", "/api/kernels/ab-cd/channels").action == gateway_action::channels);
        CHECK(std::holds_alternative<do_preflight>(decide_gateway("OPTIONS", "/api/kernels", "")));
    }

    TEST_CASE("routes: jupyter_server's sessions, and the bodies they read") {
        CHECK(session_of("GET", "/api/sessions").action == session_action::list);
        const auto made = session_of(
            "POST", "/api/sessions",
            R"({"path":"a/b.ipynb","name":"b.ipynb","type":"notebook","kernel":{"name":"ir"}})");
        CHECK(made.action == session_action::create);
        CHECK(made.fields.path == "a/b.ipynb");
        CHECK(made.fields.name == "b.ipynb");
        CHECK(made.fields.type == "notebook");
        CHECK(made.fields.kernel_name == "ir");
        CHECK_FALSE(made.fields.kernel_id);
        // Notebook 4.x's shape: the path inside "notebook", the type implied.
        const auto old = session_of("POST", "/api/sessions", R"({"notebook":{"path":"c.ipynb"}})");
        CHECK(old.fields.path == "c.ipynb");
        CHECK(old.fields.type == "notebook");
        const auto get = session_of("GET", "/api/sessions/s-1");
        CHECK(get.action == session_action::get);
        CHECK(get.session_id == "s-1");
        const auto patch = session_of("PATCH", "/api/sessions/s-1",
                                      R"({"name":"new.ipynb","kernel":{"id":"k-2"}})");
        CHECK(patch.action == session_action::update);
        CHECK(patch.fields.name == "new.ipynb");
        CHECK(patch.fields.kernel_id == "k-2");
        CHECK_FALSE(patch.fields.path);
        CHECK(session_of("DELETE", "/api/sessions/s-1").action == session_action::remove);
        CHECK(status_of("POST", "/api/sessions", R"({"name":"no path"})") == 400);
        CHECK(status_of("POST", "/api/sessions", R"({"path":7})") == 400);
        CHECK(status_of("POST", "/api/sessions", R"({"path":"a","kernel":"python3"})") == 400);
        CHECK(status_of("POST", "/api/sessions", R"({"path":"a","kernel":{"name":"../x"}})") ==
              400);
        CHECK(status_of("PATCH", "/api/sessions/s-1", "") == 400);
        CHECK(status_of("PATCH", "/api/sessions/s-1", "null") == 400);
        CHECK(status_of("GET", "/api/sessions/..") == 404);
        auto refused = decide_gateway("PATCH", "/api/sessions", "{}");
        REQUIRE(std::holds_alternative<http_response>(refused));
        CHECK(std::get<http_response>(refused).status == 405);
        CHECK(std::get<http_response>(refused).headers.at(0).second == "GET, POST");
    }

    TEST_CASE("routes: wrong methods 405, unknown paths 404, bad bodies 400") {
        CHECK(status_of("PUT", "/api/kernels") == 405);
        CHECK(status_of("GET", "/api/kernels/x/restart") == 405);
        CHECK(status_of("DELETE", "/api/kernelspecs") == 405);
        CHECK(status_of("GET", "/api/sessionz") == 404);
        CHECK(status_of("PUT", "/api/sessions/s1") == 405);
        CHECK(status_of("GET", "/kernelspecs/python3/../../etc/passwd") == 404);
        CHECK(status_of("GET", "/kernelspecs/python3/.hidden") == 404);
        CHECK(status_of("POST", "/api/kernels", "[1]") == 400);
        CHECK(status_of("POST", "/api/kernels", R"({"env":{"A":1}})") == 400);
        CHECK(status_of("POST", "/api/kernels", R"({"name":"../x"})") == 400);
    }

    TEST_CASE("decide: a kernel's websocket takes the token as ?token= too; preflights need none") {
        request_view r{.method = "GET",
                       .path = "/api/kernels/k1/channels",
                       .query = "token=s3cret",
                       .body = "",
                       .authorization = {}};
        CHECK(std::holds_alternative<do_gateway>(decide(r, "s3cret", false)));
        request_view rest{.method = "GET",
                          .path = "/api/kernels",
                          .query = "token=s3cret",
                          .body = "",
                          .authorization = {}};
        CHECK(std::get<http_response>(decide(rest, "s3cret", false)).status ==
              401); // a header there
        r.query = "token=wrong";
        CHECK(std::get<http_response>(decide(r, "s3cret", false)).status == 401);
        r.authorization = "token s3cret";
        CHECK(std::holds_alternative<do_gateway>(decide(r, "s3cret", false)));
        request_view v1{.method = "POST",
                        .path = "/v1/exec",
                        .query = "token=s3cret",
                        .body = "{}",
                        .authorization = {}};
        CHECK(std::get<http_response>(decide(v1, "s3cret", false)).status ==
              401); // header only there
        request_view pre{.method = "OPTIONS",
                         .path = "/api/kernels",
                         .query = "",
                         .body = "",
                         .authorization = {}};
        CHECK(std::holds_alternative<do_preflight>(decide(pre, "s3cret", false)));
        pre.path = "/v1/exec";
        CHECK(std::holds_alternative<do_preflight>(decide(pre, "s3cret", false)));
        request_view start{
            .method = "POST", .path = "/api/kernels", .query = "", .body = "", .authorization = {}};
        CHECK(std::get<http_response>(decide(start, "", true)).status == 503);
        request_view list{
            .method = "GET", .path = "/api/kernels", .query = "", .body = "", .authorization = {}};
        CHECK(std::holds_alternative<do_gateway>(decide(list, "", true))); // listing still works
        CHECK(route_label("/api/kernels/x/channels") == "/api/kernels/channels");
        CHECK(route_label("/api/sessions/s1") == "/api/sessions");
        CHECK(route_label("/kernelspecs/a/b.png") == "/api/kernelspecs");
        request_view session{.method = "POST",
                             .path = "/api/sessions",
                             .query = "",
                             .body = R"({"path":"a"})",
                             .authorization = {}};
        CHECK(std::get<http_response>(decide(session, "", true)).status ==
              503); // it starts a kernel
        session.method = "GET";
        CHECK(std::holds_alternative<do_session>(decide(session, "", true)));
    }

    TEST_CASE("kpool serve --help lists every route of both tables") {
        const std::string help = endpoint_help();
        for (const char* line :
             {"GET /v1/health", "POST /v1/exec", "GET, POST /v1/run/PATH", "POST /v1/run ",
              "GET    /api/kernels ", "POST   /api/kernels/{id}/restart", "GET    /api/sessions ",
              "PATCH  /api/sessions/{session}", "GET    /kernelspecs/{name}/{file}"}) {
            CAPTURE(line);
            CHECK(help.find(line) != std::string::npos);
        }
        CHECK(std::count(help.begin(), help.end(), '\n') ==
              10 + 2 + 16); // the v1 rows take 10 lines
    }

    TEST_CASE("the v1 subprotocol is chosen only when offered") {
        CHECK(choose_protocol(std::nullopt) == ws_protocol::legacy);
        CHECK(choose_protocol(std::string("chat, v1.kernel.websocket.jupyter.org")) ==
              ws_protocol::v1);
        CHECK(choose_protocol(std::string("v2.other")) == ws_protocol::legacy);
    }

    TEST_CASE("legacy: a text message becomes the wire parts; without a channel it goes to shell") {
        auto m = decode_client_message(
            ws_protocol::legacy,
            R"({"header":{"msg_id":"1","msg_type":"execute_request"},"content":{"code":"1"}})",
            false);
        REQUIRE(m.ok());
        CHECK(m->channel == "shell");
        REQUIRE(m->parts.size() == 4);
        CHECK(json::parse(m->parts[0])["msg_type"] == "execute_request");
        CHECK(m->parts[1] == "{}"); // parent_header and metadata default to empty objects
        CHECK(json::parse(m->parts[3])["code"] == "1");
        CHECK(!decode_client_message(ws_protocol::legacy, "not json", false).ok());
        CHECK(!decode_client_message(ws_protocol::legacy, R"({"header":{}})", false).ok());
        CHECK(!decode_client_message(ws_protocol::legacy,
                                     R"({"header":{"msg_type":"x"},"channel":3})", false)
                   .ok());
    }

    TEST_CASE("legacy binary: big-endian offsets, the JSON, then the buffers; both ways") {
        const std::string text =
            R"({"header":{"msg_id":"1","msg_type":"comm_msg"},"channel":"shell"})";
        const std::string bytes =
            be32(3) + be32(16) + be32(16 + static_cast<std::uint32_t>(text.size())) +
            be32(16 + static_cast<std::uint32_t>(text.size()) + 3) + text + "abc" + "de";
        auto m = decode_client_message(ws_protocol::legacy, bytes, true);
        REQUIRE(m.ok());
        REQUIRE(m->parts.size() == 6);
        CHECK(m->parts[4] == "abc");
        CHECK(m->parts[5] == "de");
        // Out: jupyter_server's layout, which its own deserializer reads back.
        auto out = encode_for_client(ws_protocol::legacy, *m);
        REQUIRE(out);
        CHECK(out->binary);
        auto back = decode_client_message(ws_protocol::legacy, out->data, true);
        REQUIRE(back.ok());
        CHECK(back->parts == m->parts);
        CHECK(!decode_client_message(ws_protocol::legacy, be32(9) + "x", true).ok());
        CHECK(!decode_client_message(ws_protocol::legacy, be32(1) + be32(999), true).ok());
    }

    TEST_CASE("legacy out: msg_id and msg_type beside the header, the kernel's JSON as it is") {
        channel_message m{"iopub",
                          {R"({"msg_id": "m1", "msg_type": "stream"})", R"({"msg_id": "p"})", "{}",
                           R"({"name": "stdout", "text": "hi"})"}};
        auto out = encode_for_client(ws_protocol::legacy, m);
        REQUIRE(out);
        CHECK(!out->binary);
        const json j = json::parse(out->data);
        CHECK(j["msg_id"] == "m1");
        CHECK(j["msg_type"] == "stream");
        CHECK(j["channel"] == "iopub");
        CHECK(j["parent_header"]["msg_id"] == "p");
        CHECK(j["content"]["text"] == "hi");
        CHECK(j["buffers"] == json::array());
        m.parts[0] = "[]";
        CHECK(!encode_for_client(ws_protocol::legacy, m)); // not a message
    }

    TEST_CASE("v1: little-endian offsets, the channel, the wire parts unchanged") {
        channel_message m{"shell", {R"({"msg_id":"1","msg_type":"x"})", "{}", "{}", "{}", "buf"}};
        auto out = encode_for_client(ws_protocol::v1, m);
        REQUIRE(out);
        CHECK(out->binary);
        CHECK(out->data.substr(0, 8) == le64(7)); // channel start, its end, 5 part ends
        CHECK(out->data.substr(8, 8) == le64(64));
        auto back = decode_client_message(ws_protocol::v1, out->data, true);
        REQUIRE(back.ok());
        CHECK(back->channel == "shell");
        CHECK(back->parts == m.parts);
        CHECK(!decode_client_message(ws_protocol::v1, "{}", false).ok()); // text: not v1
        CHECK(
            !decode_client_message(ws_protocol::v1, le64(3) + le64(32) + le64(31) + le64(40), true)
                 .ok());
    }

    TEST_CASE("the kernel model's time and ids look as jupyter_server's do") {
        const auto t =
            std::chrono::system_clock::time_point(std::chrono::microseconds(1'700'000'000'123'456));
        CHECK(kpool::protocol::iso8601_utc(t) == "2023-11-14T22:13:20.123456Z");
        const std::string id = kpool::protocol::random_uuid();
        CHECK(std::regex_match(
            id, std::regex("[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}")));
        CHECK(kpool::protocol::random_uuid() != id);
    }
}
