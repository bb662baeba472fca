// Control protocol v1: request parsing, per-op validation, replies, and a bad-input table.
#include "protocol/control.hpp"
#include "protocol/op_table.hpp"
#include "protocol/text.hpp"

#include <doctest/doctest.h>

using namespace kpool::protocol;
using json = nlohmann::json;

TEST_SUITE("control") {
    TEST_CASE("a well-formed acquire") {
        auto req = parse_control_request(
            R"({"op":"acquire","pool":"python3","timeout_ms":5000,"lease_s":600,"req_id":7})");
        REQUIRE(req.ok());
        CHECK(req->op == "acquire");
        CHECK(req->req_id == 7);
        auto args = read_request(ops::acquire, req->body);
        REQUIRE(args.ok());
        CHECK(args->pool == "python3");
        CHECK(args->timeout_ms == 5000);
        CHECK(args->lease_s == doctest::Approx(600));
    }

    TEST_CASE("optional acquire fields may be left out") {
        auto args = read_request(ops::acquire, json{{"op", "acquire"}, {"pool", "p"}});
        REQUIRE(args.ok());
        CHECK_FALSE(args->timeout_ms.has_value());
        CHECK_FALSE(args->lease_s.has_value());
        CHECK_FALSE(args->memory_history);
    }

    TEST_CASE("history: memory or file, on acquire and context") {
        auto memory = read_request(ops::acquire,
                                   json{{"op", "acquire"}, {"pool", "p"}, {"history", "memory"}});
        REQUIRE(memory.ok());
        CHECK(memory->memory_history);
        CHECK(memory->has_context());
        CHECK_FALSE(
            read_request(ops::acquire, json{{"op", "acquire"}, {"pool", "p"}, {"history", "file"}})
                ->memory_history);
        CHECK(read_request(ops::acquire, json{{"op", "acquire"}, {"pool", "p"}, {"history", true}})
                  .err()
                  .message == "field 'history' must be \"memory\" or \"file\"");
        CHECK(parse_context(json{{"op", "context"}, {"kernel_id", "k"}, {"history", "memory"}})
                  ->memory_history);
    }

    TEST_CASE("replies carry ok, the req_id and error code and message") {
        CHECK(json::parse(make_ok_reply({{"x", 1}}, "r1")) ==
              json{{"ok", true}, {"x", 1}, {"req_id", "r1"}});
        CHECK(json::parse(make_ok_reply(json::object(), nullptr)) == json{{"ok", true}});
        CHECK(json::parse(make_error_reply({kpool::errc::unknown_pool, "no"}, 3)) ==
              json{{"ok", false},
                   {"req_id", 3},
                   {"error", {{"code", "unknown_pool"}, {"message", "no"}}}});
    }

    TEST_CASE("every error code has its protocol name") {
        using kpool::errc;
        CHECK(std::string(kpool::to_string(errc::bad_request)) == "bad_request");
        CHECK(std::string(kpool::to_string(errc::unknown_op)) == "unknown_op");
        CHECK(std::string(kpool::to_string(errc::unknown_pool)) == "unknown_pool");
        CHECK(std::string(kpool::to_string(errc::unknown_kernel)) == "unknown_kernel");
        CHECK(std::string(kpool::to_string(errc::timeout)) == "timeout");
        CHECK(std::string(kpool::to_string(errc::capacity)) == "capacity");
        CHECK(std::string(kpool::to_string(errc::shutting_down)) == "shutting_down");
        CHECK(std::string(kpool::to_string(errc::internal)) == "internal");
    }

    TEST_CASE("bad requests: each gets one clear bad_request message") {
        const std::string deep = std::string(100, '[') + std::string(100, ']');
        const std::string huge = "{\"op\":\"" + std::string(70000, 'a') + "\"}";
        const std::vector<std::pair<std::string, std::string>> table = {
            {"", "empty request"},
            {"not json", "request is not valid JSON (UTF-8): 'not json'"},
            {"{\"op\":\"ping\"", "request is not valid JSON (UTF-8): '{\"op\":\"ping\"'"},
            {"[1,2]", "request must be a JSON object"},
            {"\"ping\"", "request must be a JSON object"},
            {"{}", "missing field 'op'"},
            {R"({"op":5})", "field 'op' must be a non-empty string"},
            {R"({"op":""})", "field 'op' must be a non-empty string"},
            {R"({"op":"ping","req_id":[1]})", "field 'req_id' must be a string or an integer"},
            {R"({"op":"ping","req_id":1.5})", "field 'req_id' must be a string or an integer"},
            {"{\"op\":\"ping\",\"x\":\"\xff\xfe\"}",
             "request is not valid JSON (UTF-8): '{\"op\":\"ping\",\"x\":\"\xff\xfe\"}'"},
            {deep, "request nests deeper than 16 levels"},
            {huge, "request larger than 65536 bytes"},
        };
        for (const auto& [input, message] : table) {
            CAPTURE(input.substr(0, 40));
            auto r = parse_control_request(input);
            REQUIRE_FALSE(r.ok());
            CHECK(r.err().code == kpool::errc::bad_request);
            CHECK(r.err().message == message);
        }
    }

    TEST_CASE("bad op fields") {
        const std::vector<std::pair<json, std::string>> acquire_table = {
            {{{"op", "acquire"}}, "missing field 'pool'"},
            {{{"op", "acquire"}, {"pool", 1}}, "field 'pool' must be a non-empty string"},
            {{{"op", "acquire"}, {"pool", "p"}, {"timeout_ms", -1}},
             "field 'timeout_ms' must be an integer from 0 to 3600000"},
            {{{"op", "acquire"}, {"pool", "p"}, {"timeout_ms", 1.5}},
             "field 'timeout_ms' must be an integer from 0 to 3600000"},
            {{{"op", "acquire"}, {"pool", "p"}, {"timeout_ms", 99999999999}},
             "field 'timeout_ms' must be an integer from 0 to 3600000"},
            {{{"op", "acquire"}, {"pool", "p"}, {"lease_s", 0}},
             "field 'lease_s' must be a number above 0 and at most 31536000"},
            {{{"op", "acquire"}, {"pool", "p"}, {"lease_s", "10"}},
             "field 'lease_s' must be a number above 0 and at most 31536000"},
            {{{"op", "acquire"}, {"pool", "p"}, {"colour", "red"}}, "unknown field 'colour'"},
        };
        for (const auto& [body, message] : acquire_table) {
            CAPTURE(body.dump());
            auto r = read_request(ops::acquire, body);
            REQUIRE_FALSE(r.ok());
            CHECK(r.err().message == message);
        }
        CHECK(read_request(ops::release, json{{"op", "release"}}).err().message ==
              "missing field 'kernel_id'");
        CHECK(read_request(ops::release, json{{"op", "release"}, {"kernel_id", "k"}, {"x", 1}})
                  .err()
                  .message == "unknown field 'x'");
        CHECK(read_request(ops::ping, json{{"op", "ping"}, {"pool", "p"}}).err().message ==
              "unknown field 'pool'");
        CHECK(read_request(ops::ping, json{{"op", "ping"}, {"req_id", "r"}}).ok());
    }

    TEST_CASE("acquire with cwd and env; signal; poll") {
        auto args = read_request(
            ops::acquire,
            json{{"op", "acquire"}, {"pool", "p"}, {"cwd", "/home/u"}, {"env", {{"A", "1"}}}});
        REQUIRE(args.ok());
        CHECK(args->cwd == "/home/u");
        CHECK(args->env == std::map<std::string, std::string>{{"A", "1"}});
        CHECK(args->has_context());
        CHECK_FALSE(
            read_request(ops::acquire, json{{"op", "acquire"}, {"pool", "p"}, {"cwd", nullptr}})
                ->has_context());
        CHECK(read_request(ops::acquire, json{{"op", "acquire"}, {"pool", "p"}, {"cwd", "rel"}})
                  .err()
                  .message == "field 'cwd' must be an absolute path");
        CHECK(
            read_request(ops::acquire, json{{"op", "acquire"}, {"pool", "p"}, {"env", {{"A", 1}}}})
                .err()
                .message == "field 'env': 'A' must be a name without '=' with a string value");
        CHECK(read_request(ops::acquire,
                           json{{"op", "acquire"}, {"pool", "p"}, {"env", {{"A=B", "1"}}}})
                  .err()
                  .message == "field 'env': 'A=B' must be a name without '=' with a string value");
        CHECK(read_request(ops::acquire, json{{"op", "acquire"}, {"pool", "p"}, {"env", "A=1"}})
                  .err()
                  .message == "field 'env' must be an object of strings");

        auto sig =
            read_request(ops::signal, json{{"op", "signal"}, {"kernel_id", "k"}, {"signum", 2}});
        REQUIRE(sig.ok());
        CHECK(sig->signum == 2);
        CHECK(read_request(ops::signal, json{{"op", "signal"}, {"kernel_id", "k"}, {"signum", 0}})
                  .err()
                  .message == "field 'signum' must be a signal number from 1 to 64");
        CHECK(read_request(ops::signal, json{{"op", "signal"}, {"kernel_id", "k"}}).err().message ==
              "missing field 'signum'");
        CHECK(read_request(ops::poll, json{{"op", "poll"}, {"kernel_id", "k"}})->kernel_id == "k");
        auto renew =
            read_request(ops::renew, json{{"op", "renew"}, {"kernel_id", "k"}, {"lease_s", 30}});
        REQUIRE(renew.ok());
        CHECK(renew->lease_s == 30);
        CHECK(read_request(ops::renew, json{{"op", "renew"}, {"kernel_id", "k"}}).err().message ==
              "missing field 'lease_s'");
        CHECK(read_request(ops::renew, json{{"op", "renew"}, {"kernel_id", "k"}, {"lease_s", 0}})
                  .err()
                  .message == "field 'lease_s' must be a number above 0 and at most 31536000");
        auto ctx = parse_context(
            json{{"op", "context"}, {"kernel_id", "k"}, {"cwd", "/w"}, {"env", {{"A", "1"}}}});
        REQUIRE(ctx.ok());
        CHECK(ctx->cwd == "/w");
        CHECK(ctx->env.at("A") == "1");
        CHECK(parse_context(json{{"op", "context"}, {"kernel_id", "k"}, {"env", {{"A", "1"}}}})
                  ->cwd == std::nullopt);
        CHECK(parse_context(json{{"op", "context"}, {"kernel_id", "k"}}).err().message ==
              "give 'cwd', 'env' or 'history'");
        CHECK(parse_context(json{{"op", "context"}, {"kernel_id", "k"}, {"cwd", "w"}})
                  .err()
                  .message == "field 'cwd' must be an absolute path");
        CHECK(parse_context(json{{"op", "context"}, {"kernel_id", "k"}, {"env", {{"A=B", "1"}}}})
                  .err()
                  .code == kpool::errc::bad_request);
        CHECK(parse_context(json{{"op", "context"}, {"cwd", "/w"}}).err().code ==
              kpool::errc::bad_request);
        CHECK(
            parse_context(json{{"op", "context"}, {"kernel_id", "k"}, {"cwd", "/w"}, {"pool", "p"}})
                .err()
                .code == kpool::errc::bad_request);
    }

    TEST_CASE("resize and drain name a pool; resize a size") {
        auto r = read_request(ops::resize, json{{"op", "resize"}, {"pool", "p"}, {"size", 4}});
        REQUIRE(r.ok());
        CHECK(r->pool == "p");
        CHECK(r->size == 4);
        CHECK(read_request(ops::resize, json{{"op", "resize"}, {"pool", "p"}, {"size", -1}})
                  .err()
                  .message == "field 'size' must be an integer from 0 to 4096");
        CHECK(read_request(ops::resize, json{{"op", "resize"}, {"pool", "p"}, {"size", 2.5}})
                  .err()
                  .message == "field 'size' must be an integer from 0 to 4096");
        CHECK(read_request(ops::resize, json{{"op", "resize"}, {"size", 1}}).err().message ==
              "missing field 'pool'");
        auto d = read_request(ops::drain, json{{"op", "drain"}, {"pool", "p"}});
        REQUIRE(d.ok());
        CHECK_FALSE(d->size.has_value());
        CHECK(read_request(ops::drain, json{{"op", "drain"}, {"pool", "p"}, {"size", 0}})
                  .err()
                  .message == "unknown field 'size'");
    }

    TEST_CASE("user text echoed back is capped and stripped of control characters") {
        CHECK(echo_safe("a\nb\x01") == "a?b?");
        const std::string long_text(500, 'x');
        CHECK(echo_safe(long_text) == std::string(128, 'x') + "...");
        // Invalid UTF-8 survives into a reply without throwing.
        CHECK_NOTHROW(make_error_reply({kpool::errc::bad_request, echo_safe("\xff\xfe")}, nullptr));
    }

    TEST_CASE("the req_id of a request that fails validation is still echoed") {
        CHECK(salvage_req_id(R"({"op":5,"req_id":"abc"})") == "abc");
        CHECK(salvage_req_id("garbage").is_null());
        CHECK(salvage_req_id(R"({"req_id":{"nested":1}})").is_null());
    }
}
