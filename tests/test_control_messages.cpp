// The control protocol as data: the op table, the typed request builders (each read back by its
// parser unchanged) and the reply readers clients act on.
#include "daemon/service/daemon.hpp"
#include "protocol/control.hpp"
#include "protocol/control_ops.hpp"
#include "protocol/control_replies.hpp"
#include "protocol/control_requests.hpp"
#include "protocol/op_table.hpp"

#include <doctest/doctest.h>

#include <csignal>
#include <set>

using namespace kpool::protocol;
using json = nlohmann::json;
using kpool::errc;

TEST_SUITE("control messages") {
    TEST_CASE("the op table: every op once, every field once per op") {
        std::set<std::string_view> names;
        for (const op_spec& op : control_ops()) {
            CHECK(names.insert(op.name).second);
            std::set<std::string_view> fields;
            for (const field_spec& f : op.fields) {
                CHECK(fields.insert(f.name).second);
                CHECK(f.name != "op");
                CHECK(f.name != "req_id");
                if (f.kind == field_kind::integer) {
                    CHECK(f.min <= f.max);
                }
            }
        }
        CHECK(names == std::set<std::string_view>{"ping", "acquire", "release", "signal", "poll",
                                                  "renew", "context", "status", "kernelspecs",
                                                  "resize", "drain"});
        CHECK(find_control_op("acquire") != nullptr);
        CHECK(find_control_op("acquire")->fields.front().name == "pool");
        CHECK(find_control_op("fly") == nullptr);
    }

    TEST_CASE("kpoold serves every op of the table, and no other") {
        std::vector<std::string_view> table;
        for (const op_spec& op : control_ops()) {
            table.push_back(op.name);
        }
        CHECK(kpool::daemon::daemon::served_ops() == table);
    }

    TEST_CASE(
        "every builder's request passes its op's table row and parses back to what was built") {
        acquire_args a;
        a.pool = "python3";
        a.timeout_ms = 2500;
        a.lease_s = 90.5;
        a.cwd = "/srv/work";
        a.env = {{"A", "1"}, {"B", "two words"}};
        a.memory_history = true;
        auto got = read_request(ops::acquire, requests::acquire(a));
        REQUIRE(got.ok());
        CHECK(got->pool == a.pool);
        CHECK(got->timeout_ms == a.timeout_ms);
        CHECK(got->lease_s == a.lease_s);
        CHECK(got->cwd == a.cwd);
        CHECK(got->env == a.env);
        CHECK(got->memory_history);

        acquire_args bare;
        bare.pool = "ir";
        const json bare_request = requests::acquire(bare);
        CHECK(bare_request ==
              json{{"op", "acquire"}, {"pool", "ir"}}); // defaults stay the daemon's
        CHECK_FALSE(read_request(ops::acquire, bare_request)->has_context());

        CHECK(read_request(ops::release, requests::release("k1"))->kernel_id == "k1");
        CHECK(read_request(ops::poll, requests::poll("k2"))->kernel_id == "k2");
        CHECK(requests::op_of(requests::poll("k2")) == "poll");
        auto renew = read_request(ops::renew, requests::renew("k3", 30));
        REQUIRE(renew.ok());
        CHECK(renew->kernel_id == "k3");
        CHECK(renew->lease_s == 30);
        auto sig = read_request(ops::signal, requests::signal("k4", SIGINT));
        REQUIRE(sig.ok());
        CHECK(sig->signum == SIGINT);
        auto ctx = parse_context(requests::context({"k5", "/w", {{"X", "y"}}, false}));
        REQUIRE(ctx.ok());
        CHECK(ctx->cwd == "/w");
        CHECK(ctx->env.at("X") == "y");
        CHECK_FALSE(ctx->memory_history);
        auto resize = read_request(ops::resize, requests::resize("p", 7));
        REQUIRE(resize.ok());
        CHECK(resize->size == 7);
        CHECK(read_request(ops::drain, requests::drain("p"))->pool == "p");
        for (const json& r : {requests::ping(), requests::status(), requests::kernelspecs()}) {
            CHECK(check_fields(*find_control_op(requests::op_of(r)), r).ok());
            CHECK(find_control_op(requests::op_of(r)) != nullptr);
        }
        CHECK(requests::op_of(json{{"op", 3}}).empty());
    }

    TEST_CASE("a field's rules are one row: front ends check their own cwd and env by it") {
        CHECK(check_field(cwd_field, "/abs").ok());
        CHECK(check_field(cwd_field, "rel").err().message ==
              "field 'cwd' must be an absolute path");
        CHECK(check_field(cwd_field, "").err().code == errc::bad_request);
        CHECK(check_field(env_field, json{{"A", "1"}}).ok());
        CHECK(check_field(env_field, json{{"A=B", "1"}}).err().message ==
              "field 'env': 'A=B' must be a name without '=' with a string value");
        CHECK(env_of(json{{"A", "1"}}) == std::map<std::string, std::string>{{"A", "1"}});
        CHECK(env_of(nullptr).empty());
    }

    TEST_CASE("refusals read as errors with their codes") {
        CHECK_FALSE(refusal_of(json{{"ok", true}}).has_value());
        auto e =
            refusal_of(json{{"ok", false}, {"error", {{"code", "capacity"}, {"message", "full"}}}});
        REQUIRE(e.has_value());
        CHECK(e->code == errc::capacity);
        CHECK(e->message == "full");
        CHECK(refusal_of(json{{"ok", false}, {"error", {{"code", "from_the_future"}}}})->code ==
              errc::internal);
        CHECK(refusal_of(json{{"ok", false}})->message == "kpoold refused");
        CHECK(refusal_of(json{{"ok", false}, {"error", "text"}})->code == errc::internal);
        CHECK(refusal_of(json::array())->code == errc::internal);
        for (const char* name :
             {"bad_request", "unknown_op", "unknown_pool", "unknown_kernel", "timeout", "capacity",
              "unavailable", "shutting_down", "internal"}) {
            auto code = errc_from_string(name);
            REQUIRE(code.has_value());
            CHECK(std::string(kpool::to_string(*code)) == name);
        }
        CHECK_FALSE(errc_from_string("").has_value());
    }

    TEST_CASE("an acquire reply: the kernel, its connection, and an unusable connection still "
              "names the kernel") {
        connection_info info;
        info.shell_port = 1;
        info.iopub_port = 2;
        info.stdin_port = 3;
        info.control_port = 4;
        info.hb_port = 5;
        info.key = "k";
        const json reply = {
            {"ok", true},    {"kernel_id", "abc"},          {"pool", "python3"},
            {"pid", 42},     {"connection", to_json(info)}, {"connection_file", "/run/k.json"},
            {"pool_warm", 2}};
        auto k = read_acquire_reply(reply);
        REQUIRE(k.ok());
        CHECK(k->kernel_id == "abc");
        CHECK(k->pool == "python3");
        CHECK(k->pid == 42);
        CHECK(k->pool_warm == 2);
        CHECK(k->connection_file == "/run/k.json");
        REQUIRE(k->connection.ok());
        CHECK(k->connection->hb_port == 5);

        json broken = reply;
        broken["connection"] = "nope";
        auto b = read_acquire_reply(broken);
        REQUIRE(b.ok());
        CHECK(b->kernel_id == "abc");
        CHECK_FALSE(b->connection.ok());

        CHECK(read_acquire_reply(json{{"ok", true}}).err().code == errc::internal);
        CHECK(read_acquire_reply(
                  json{{"ok", false}, {"error", {{"code", "timeout"}, {"message", "m"}}}})
                  .err()
                  .code == errc::timeout);
    }

    TEST_CASE("poll and status replies") {
        CHECK(read_poll_reply(json{{"ok", true}, {"alive", true}})->alive);
        auto gone = read_poll_reply(json{{"ok", true}, {"alive", false}, {"exit_code", -9}});
        REQUIRE(gone.ok());
        CHECK_FALSE(gone->alive);
        CHECK(gone->exit_code == -9);
        CHECK(read_poll_reply(json{{"ok", false}, {"error", {{"code", "unknown_kernel"}}}})
                  .err()
                  .code == errc::unknown_kernel);

        const json status = {{"ok", true},
                             {"pools",
                              {{{"name", "py"},
                                {"kernelspec", "python3"},
                                {"size", 3},
                                {"warm", 2},
                                {"starting", 1},
                                {"leased", 4},
                                {"failing", false},
                                {"drained", true},
                                {"removed", false},
                                {"recent", {{"time_to_warm_s_p50", 0.75}}}},
                               {{"name", "r"}, {"recent", {{"time_to_warm_s_p50", nullptr}}}},
                               "not a pool"}}};
        auto pools = read_status_pools(status);
        REQUIRE(pools.ok());
        REQUIRE(pools->size() == 2);
        const pool_summary& py = (*pools)[0];
        CHECK(py.name == "py");
        CHECK(py.kernelspec == "python3");
        CHECK(py.size == 3);
        CHECK(py.warm == 2);
        CHECK(py.starting == 1);
        CHECK(py.leased == 4);
        CHECK(py.drained);
        CHECK(py.time_to_warm_s_p50 == 0.75);
        CHECK((*pools)[1].kernelspec ==
              "r"); // a pool's kernelspec is its name unless it says otherwise
        CHECK_FALSE((*pools)[1].time_to_warm_s_p50.has_value());
        CHECK(read_status_pools(json{{"ok", true}, {"pools", 3}}).err().code == errc::internal);
    }
}
