// serve/front_door: the checks before routing, each of the attacks refused with its
// status, and the callers kpool serve is for (curl, urllib, gateway clients, an allowed front
// end) let through; the CORS headers an allowed origin gets.
#include "serve/front_door.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

using namespace kpool::serve;

namespace {

door_policy no_token() {
    return {.token_required = false, .tls = false, .allow_origins = {}, .allow_hosts = {}};
}

door_request post(std::string_view host, std::optional<std::string> origin = std::nullopt,
                  std::optional<std::string> type = std::string("application/json")) {
    return {.method = "POST",
            .host = host,
            .origin = std::move(origin),
            .content_type = std::move(type),
            .sec_fetch_site = std::nullopt,
            .authorization = std::nullopt};
}

int status_of(const door_request& r, const door_policy& p) {
    const auto refused = check_front_door(r, p);
    if (!refused) {
        return 0;
    }
    const auto body = nlohmann::json::parse(refused->body);
    CHECK(body["error"].is_string());
    CHECK(body["message"].is_string());
    return refused->status;
}

bool has_header(const std::vector<std::pair<std::string, std::string>>& headers,
                const std::string& name, const std::string& value) {
    return std::find(headers.begin(), headers.end(), std::pair{name, value}) != headers.end();
}

} // namespace

TEST_SUITE("front door") {
    TEST_CASE("plain local clients pass: no Origin, a loopback Host, a JSON body") {
        for (const char* host : {"127.0.0.1:8890", "localhost:8890", "LOCALHOST.:8890",
                                 "[::1]:8890", "127.1.2.3", "localhost", ""}) {
            CAPTURE(host);
            CHECK(status_of(post(host), no_token()) == 0);
        }
        CHECK(status_of(post("127.0.0.1:8890", std::nullopt, "application/json; charset=utf-8"),
                        no_token()) == 0);
        CHECK(status_of(post("127.0.0.1:8890", std::nullopt, "Application/JSON"), no_token()) == 0);
        door_request get{.method = "GET",
                         .host = "127.0.0.1:1",
                         .origin = {},
                         .content_type = {},
                         .sec_fetch_site = {},
                         .authorization = {}};
        CHECK(status_of(get, no_token()) == 0); // GET, DELETE, OPTIONS: no body type asked
        get.method = "DELETE";
        CHECK(status_of(get, no_token()) == 0);
    }

    TEST_CASE("a foreign Origin is 403 on every method, null included") {
        for (const char* origin : {"http://evil.example", "null", "http://127.0.0.2:8890",
                                   "https://127.0.0.1:8890", "http://127.0.0.1:8891"}) {
            CAPTURE(origin);
            CHECK(status_of(post("127.0.0.1:8890", std::string(origin)), no_token()) == 403);
            door_request ws{.method = "GET",
                            .host = "127.0.0.1:8890",
                            .origin = std::string(origin),
                            .content_type = {},
                            .sec_fetch_site = {},
                            .authorization = {}};
            CHECK(status_of(ws, no_token()) == 403);
            ws.method = "OPTIONS";
            CHECK(status_of(ws, no_token()) == 403);
        }
        door_policy with_token = no_token();
        with_token.token_required = true; // a token does not admit a foreign page's requests either
        CHECK(status_of(post("127.0.0.1:8890", std::string("http://evil.example")), with_token) ==
              403);
    }

    TEST_CASE("the server's own origin and --allow-origin pass") {
        CHECK(status_of(post("127.0.0.1:8890", std::string("http://127.0.0.1:8890")), no_token()) ==
              0);
        CHECK(status_of(post("LocalHost:8890", std::string("http://localhost:8890")), no_token()) ==
              0);
        door_policy tls = no_token();
        tls.tls = true;
        CHECK(status_of(post("127.0.0.1:8890", std::string("https://127.0.0.1:8890")), tls) == 0);
        CHECK(status_of(post("127.0.0.1:8890", std::string("http://127.0.0.1:8890")), tls) == 403);
        door_policy allowed = no_token();
        allowed.allow_origins = {"https://lab.example", "http://127.0.0.2:9000"};
        CHECK(status_of(post("127.0.0.1:8890", std::string("https://lab.example")), allowed) == 0);
        CHECK(status_of(post("127.0.0.1:8890", std::string("http://127.0.0.2:9000")), allowed) ==
              0);
        CHECK(status_of(post("127.0.0.1:8890", std::string("https://lab.example.evil")), allowed) ==
              403);
        CHECK(status_of(post("127.0.0.1:8890", std::string("null")), allowed) == 403);
        allowed.allow_origins = {"*"};
        CHECK(status_of(post("127.0.0.1:8890", std::string("null")), allowed) == 0);
    }

    TEST_CASE("DNS rebinding: without a token the Host must be loopback's or allowed") {
        CHECK(status_of(post("evil.example:8890"), no_token()) == 403);
        CHECK(status_of(post("evil.example:8890", std::string("http://evil.example:8890")),
                        no_token()) == 403);
        CHECK(status_of(post("127.0.0.1.evil.example"), no_token()) == 403);
        CHECK(status_of(post("localhost.evil.example:1"), no_token()) == 403);
        CHECK(status_of(post("10.0.0.1:8890"), no_token()) == 403);
        door_policy allowed = no_token();
        allowed.allow_hosts = {"devbox.internal"};
        CHECK(status_of(post("DevBox.Internal:8890"), allowed) == 0);
        CHECK(status_of(post("other.internal:8890"), allowed) == 403);
        door_policy with_token = no_token();
        with_token.token_required = true; // a token is what a rebinding page cannot have
        CHECK(status_of(post("evil.example:8890"), with_token) == 0);
        CHECK(status_of(post("kpool.example.com"), with_token) == 0);
    }

    TEST_CASE("a body that is not declared JSON is 415: text/plain, forms, none") {
        for (const char* type :
             {"text/plain", "text/plain;charset=UTF-8", "application/x-www-form-urlencoded",
              "multipart/form-data; boundary=x", "application/jsonp", "", "application/json-seq"}) {
            CAPTURE(type);
            CHECK(status_of(post("127.0.0.1:1", std::nullopt, std::string(type)), no_token()) ==
                  415);
        }
        CHECK(status_of(post("127.0.0.1:1", std::nullopt, std::nullopt), no_token()) == 415);
        door_request patch = post("127.0.0.1:1", std::nullopt, "text/plain");
        patch.method = "PATCH";
        CHECK(status_of(patch, no_token()) == 415);
        const auto refused =
            check_front_door(post("127.0.0.1:1", std::nullopt, "text/plain"), no_token());
        REQUIRE(refused);
        CHECK(refused->body.find("--json") != std::string::npos); // says how to send it with curl
    }

    TEST_CASE("a token-scheme Authorization lets any body type through (JupyterLab's client posts "
              "text/plain)") {
        door_request r = post("127.0.0.1:1", std::nullopt, "text/plain;charset=UTF-8");
        for (const char* header : {"token abc", "Token abc", "Bearer abc", "bearer  abc"}) {
            CAPTURE(header);
            r.authorization = header;
            CHECK(status_of(r, no_token()) == 0);
        }
        // Basic credentials a browser may remember and add by itself do not, nor a bare word.
        for (const char* header : {"Basic dTpw", "tokenabc", ""}) {
            CAPTURE(header);
            r.authorization = header;
            CHECK(status_of(r, no_token()) == 415);
        }
        // The origin checks still come first.
        r.authorization = "token abc";
        r.origin = "https://evil.example";
        CHECK(status_of(r, no_token()) == 403);
    }

    TEST_CASE("a request without Origin that a browser marks as another site's is 403") {
        door_request img{.method = "GET",
                         .host = "127.0.0.1:1",
                         .origin = {},
                         .content_type = {},
                         .sec_fetch_site = std::string("cross-site"),
                         .authorization = {}};
        CHECK(status_of(img, no_token()) == 403);
        img.sec_fetch_site = "same-site";
        CHECK(status_of(img, no_token()) == 403);
        img.sec_fetch_site = "none"; // the user typed the URL
        CHECK(status_of(img, no_token()) == 0);
        img.sec_fetch_site = "same-origin";
        CHECK(status_of(img, no_token()) == 0);
    }

    TEST_CASE("CORS headers only for an origin of --allow-origin, echoed, never *") {
        door_policy p = no_token();
        p.allow_origins = {"https://lab.example"};
        const cors_settings settings{.allow_credentials = "true",
                                     .allow_headers = "",
                                     .allow_methods = "",
                                     .expose_headers = "",
                                     .max_age = "600"};
        auto allowed = post("127.0.0.1:1", std::string("https://lab.example"));
        const auto answer = cors_headers(allowed, p, settings, false, std::nullopt);
        CHECK(has_header(answer, "access-control-allow-origin", "https://lab.example"));
        CHECK(has_header(answer, "vary", "Origin"));
        CHECK(has_header(answer, "access-control-allow-credentials", "true"));
        allowed.method = "OPTIONS";
        const auto preflight = cors_headers(allowed, p, settings, true,
                                            std::string("Authorization, Content-Type\r\nX: y"));
        CHECK(has_header(preflight, "access-control-allow-headers",
                         "Authorization, Content-TypeX y"));
        CHECK(has_header(preflight, "access-control-allow-methods",
                         "GET, POST, PATCH, DELETE, OPTIONS"));
        CHECK(has_header(preflight, "access-control-max-age", "600"));
        CHECK(cors_headers(post("127.0.0.1:1", std::string("https://evil.example")), p, settings,
                           true, {})
                  .empty());
        CHECK(cors_headers(post("127.0.0.1:1", std::string("http://127.0.0.1:1")), p, settings,
                           false, {})
                  .empty());
        CHECK(cors_headers(post("127.0.0.1:1"), p, settings, false, {}).empty());
        p.allow_origins = {"*"};
        CHECK(has_header(
            cors_headers(post("h", std::string("https://any.example")), p, settings, false, {}),
            "access-control-allow-origin", "https://any.example"));
    }

    TEST_CASE("loopback hosts and lists") {
        CHECK(is_loopback_host("127.255.0.1:80"));
        CHECK(is_loopback_host("[::1]"));
        CHECK_FALSE(is_loopback_host("[::2]:80"));
        CHECK_FALSE(is_loopback_host("128.0.0.1"));
        CHECK_FALSE(is_loopback_host("localhost.example"));
        CHECK(split_list(" a,b  c,,") == std::vector<std::string>{"a", "b", "c"});
        CHECK(split_list("").empty());
    }
}
