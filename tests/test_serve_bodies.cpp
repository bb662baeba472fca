// serve/exec_body: the request bodies and query strings of kpool serve, read and refused with
// the field named, without a server; and kpoold's refusals as the answers kpool serve gives.
#include "serve/exec_body.hpp"
#include "serve/http_response.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace kpool::serve;
using namespace std::chrono_literals;

TEST_SUITE("serve bodies") {
    TEST_CASE("an exec body with every field") {
        auto b = parse_exec_body(R"({"code": "1+1", "kernel": "ir", "timeout": 1.5, "cwd": "/tmp",
                                    "env": {"A": "b"}})");
        REQUIRE(b);
        CHECK(b->code == "1+1");
        CHECK(b->kernel.kernel == "ir");
        CHECK(b->kernel.timeout == 1500ms);
        CHECK(b->kernel.cwd == "/tmp");
        CHECK(b->kernel.env.at("A") == "b");
        // The control protocol's rules (protocol/control_ops): null is absent.
        auto nulls = parse_exec_body(R"({"code": "", "cwd": null, "env": null})");
        REQUIRE(nulls);
        CHECK(nulls->kernel.cwd.empty());
        CHECK(nulls->kernel.env.empty());
    }

    TEST_CASE("wrong bodies are refused, naming the field") {
        const std::vector<std::pair<std::string, std::string>> table = {
            {"", "the body is not JSON"},
            {"[]", "the body must be a JSON object"},
            {"{}", "field 'code' is required"},
            {R"({"code": null})", "field 'code' must be a string"},
            {R"({"code": "", "timeout": 0})",
             "field 'timeout' must be a number of seconds above 0 and at most 3600"},
            {R"({"code": "", "timeout": 1e9})",
             "field 'timeout' must be a number of seconds above 0 and at most 3600"},
            {R"({"code": "", "env": {"A=B": "c"}})",
             "field 'env': 'A=B' must be a name without '=' with a string value"},
            {R"({"code": "", "env": {"A": 1}})",
             "field 'env': 'A' must be a name without '=' with a string value"},
            {R"({"code": "", "env": []})", "field 'env' must be an object of strings"},
            {R"({"code": "", "kernel": ""})", "field 'kernel' must be a non-empty string"},
            {R"({"code": "", "parameters": {}})",
             "unknown field 'parameters' (fields: code, kernel, timeout, cwd, env)"},
        };
        for (const auto& [body, message] : table) {
            CAPTURE(body);
            auto b = parse_exec_body(body);
            REQUIRE_FALSE(b);
            CHECK(b.err().message == message);
        }
    }

    TEST_CASE("a run body keeps its parameters in the caller's order") {
        auto b = parse_run_body(
            R"({"parameters": {"zeta": 1, "alpha": [1, "x"], "mid": null}, "timeout": 2})");
        REQUIRE(b);
        std::vector<std::string> names;
        for (const auto& [name, value] : b->parameters.items()) {
            names.push_back(name);
        }
        CHECK(names == std::vector<std::string>{"zeta", "alpha", "mid"});
        CHECK(b->kernel.timeout == 2000ms);
        CHECK(parse_run_body("")->parameters.empty());
        CHECK(parse_run_body(R"({"code": "x"})").err().message ==
              "unknown field 'code' (fields: parameters, report_mode, kernel, timeout, cwd, env)");
        CHECK(parse_run_body(R"({"notebook": {}})")
                  .err()
                  .message.starts_with("unknown field 'notebook'"));
    }

    TEST_CASE("POST /v1/run's body carries the notebook itself; report_mode is papermill's") {
        auto b = parse_run_body(
            R"({"notebook": {"cells": [], "nbformat": 4}, "report_mode": true})", true);
        REQUIRE(b);
        CHECK(nlohmann::json::parse(b->notebook)["nbformat"] == 4);
        CHECK(b->report_mode);
        CHECK(parse_run_body("{}", true).err().message.starts_with("field 'notebook' is required"));
        CHECK(parse_run_body("", true).err().message == "the body is not JSON");
        CHECK(parse_run_body(R"({"notebook": "x.ipynb"})", true).err().message ==
              "field 'notebook' must be a notebook (a JSON object)");
        CHECK(parse_run_body(R"({"report_mode": 1})").err().message ==
              "field 'report_mode' must be true or false");
    }

    TEST_CASE("query parameters are decoded and typed as -p types them") {
        auto b =
            parse_run_query("a=1&b=2.5&c=True&d=None&e=hello+world&f=%2Fpath%3D&format=outputs&g");
        REQUIRE(b);
        CHECK(b->parameters.dump() ==
              R"({"a":1,"b":2.5,"c":true,"d":null,"e":"hello world","f":"/path=","g":""})");
        CHECK(b->outputs_only);
        CHECK(parse_run_query("format=xml").err().message ==
              "format must be 'outputs' or 'notebook', not 'xml'");
        CHECK(parse_run_query("=1").err().message == "a query parameter without a name");
        CHECK(parse_run_query("")->parameters.empty());
        CHECK(parse_run_query("a=%zz")->parameters["a"] == "%zz"); // not an escape: kept
        const auto on = parse_run_query("a=1&kernel=py");
        CHECK(on->kernel.kernel == "py");
        CHECK(on->parameters.dump() == R"({"a":1})");
        CHECK(parse_run_query("kernel=").err().message ==
              "'kernel' must name a pool or a kernelspec");
    }

    TEST_CASE("kpoold's refused context op: 400 for the caller's directory, else 502") {
        using json = nlohmann::json;
        const auto body = [](const http_response& r) { return json::parse(r.body); };
        using kpool::errc;
        auto r = context_refusal({errc::bad_request, "FileNotFoundError: /nope"});
        CHECK(r.status == 400);
        CHECK(body(r) == json{{"error", "bad_request"}, {"message", "FileNotFoundError: /nope"}});
        r = context_refusal({errc::unknown_kernel, "no running kernel"});
        CHECK(r.status == 502);
        CHECK(body(r)["error"] == "kernel_died");
        r = context_refusal({errc::timeout, "kpoold refused"});
        CHECK(r.status == 502);
        CHECK(body(r) == json{{"error", "daemon_error"}, {"message", "kpoold refused"}});
    }

    TEST_CASE("kpoold's refused acquire: back-pressure is 429 with Retry-After, the rest by code") {
        using kpool::errc;
        for (errc code : {errc::timeout, errc::capacity, errc::unavailable}) {
            auto r = acquire_refusal({code, "busy"}, 7);
            CHECK(r.status == 429);
            REQUIRE(r.headers.size() == 1);
            CHECK(r.headers[0].second == "7");
        }
        CHECK(acquire_refusal({errc::unknown_pool, "no"}, 1).status == 404);
        CHECK(acquire_refusal({errc::bad_request, "no"}, 1).status == 400);
        CHECK(acquire_refusal({errc::shutting_down, "no"}, 1).status == 503);
        CHECK(acquire_refusal({errc::internal, "no"}, 1).status == 502);
    }
}
