// kpool serve's /v1 routes as decide() reads its table: methods, tokens, stopping, labels.
#include "serve/routing.hpp"

#include <doctest/doctest.h>

using namespace kpool::serve;

namespace {

route decide_one(std::string_view method, std::string_view path, std::string_view body = "",
                 std::optional<std::string> authorization = {}, bool stopping = false,
                 std::string_view query = "") {
    return decide({.method = method,
                   .path = path,
                   .query = query,
                   .body = body,
                   .authorization = std::move(authorization)},
                  "s3cret", stopping);
}

http_response answer_of(route r) {
    REQUIRE(std::holds_alternative<http_response>(r));
    return std::get<http_response>(std::move(r));
}

std::string header(const http_response& r, const std::string& name) {
    for (const auto& [n, v] : r.headers) {
        if (n == name) {
            return v;
        }
    }
    return "";
}

} // namespace

TEST_SUITE("routing") {
    TEST_CASE("each /v1 row: its methods, with Allow on a 405") {
        const std::optional<std::string> token = "token s3cret";
        CHECK(
            std::holds_alternative<do_health>(decide_one("GET", "/v1/health"))); // no token needed
        CHECK(std::holds_alternative<do_metrics>(decide_one("GET", "/metrics", "", token)));
        CHECK(std::holds_alternative<do_exec>(
            decide_one("POST", "/v1/exec", R"({"code":"1"})", token)));
        CHECK(std::holds_alternative<do_run>(decide_one("GET", "/v1/run/a/b.ipynb", "", token)));
        CHECK(std::get<do_run>(decide_one("POST", "/v1/run/a/b.ipynb", "{}", token)).path ==
              "a/b.ipynb");

        const auto health = answer_of(decide_one("POST", "/v1/health"));
        CHECK(health.status == 405);
        CHECK(header(health, "allow") == "GET");
        const auto exec = answer_of(decide_one("GET", "/v1/exec", "", token));
        CHECK(exec.status == 405);
        CHECK(header(exec, "allow") == "POST");
        CHECK(exec.body.find("GET is not allowed on /v1/exec (allowed: POST)") !=
              std::string::npos);
        CHECK(header(answer_of(decide_one("PUT", "/v1/run/x.ipynb", "", token)), "allow") ==
              "GET, POST");
        CHECK(answer_of(decide_one("OPTIONS", "/v1/health")).status ==
              405); // health has no preflight
        CHECK(std::holds_alternative<do_preflight>(decide_one("OPTIONS", "/v1/run/x.ipynb")));
    }

    TEST_CASE("the token is checked before the method and the body; health needs none") {
        CHECK(answer_of(decide_one("GET", "/v1/exec")).status == 401);
        CHECK(answer_of(decide_one("GET", "/metrics")).status == 401);
        CHECK(answer_of(decide_one("POST", "/v1/exec", "not json", "Bearer s3cret")).status == 400);
        CHECK(answer_of(decide_one("GET", "/v1/nothing", "", "token s3cret")).status == 404);
        // POST /v1/run takes the notebook in its body; GET needs a path under the root.
        CHECK(answer_of(decide_one("GET", "/v1/run", "", "token s3cret")).status == 405);
        CHECK(answer_of(decide_one("POST", "/v1/run", "{}", "token s3cret")).status ==
              400); // no notebook
        auto upload =
            decide_one("POST", "/v1/run", R"({"notebook": {"cells": []}})", "token s3cret");
        REQUIRE(std::holds_alternative<do_run>(upload));
        CHECK(std::get<do_run>(upload).path.empty());
        CHECK_FALSE(std::get<do_run>(upload).body.notebook.empty());
    }

    TEST_CASE("while stopping, routes that run code get 503; health and metrics still answer") {
        const std::optional<std::string> token = "token s3cret";
        CHECK(answer_of(decide_one("POST", "/v1/exec", R"({"code":"1"})", token, true)).status ==
              503);
        CHECK(answer_of(decide_one("GET", "/v1/run/x.ipynb", "", token, true)).status == 503);
        CHECK(answer_of(decide_one("GET", "/v1/exec", "", token, true)).status ==
              405); // the method first
        CHECK(std::holds_alternative<do_health>(decide_one("GET", "/v1/health", "", {}, true)));
        CHECK(std::holds_alternative<do_metrics>(decide_one("GET", "/metrics", "", token, true)));
    }

    TEST_CASE("route_label: one label per row or gateway resource, else other") {
        CHECK(route_label("/v1/health") == "/v1/health");
        CHECK(route_label("/metrics") == "/metrics");
        CHECK(route_label("/v1/exec") == "/v1/exec");
        CHECK(route_label("/v1/run/a/b.ipynb") == "/v1/run");
        CHECK(route_label("/v1/run") == "/v1/run");
        CHECK(route_label("/v1/runs") == "other");
        CHECK(route_label("/api") == "/api");
        CHECK(route_label("/api/kernels/k") == "/api/kernels");
        CHECK(route_label("/api/nothing") == "other");
        CHECK(route_label("/favicon.ico") == "other");
    }
}
