// runner/notebook_engine and jupyter/execution_tracker driven by recorded kernel messages, as
// the pool is driven by fakes: papermill's rules for each way a cell's execution can end, and
// when an execution is over, without a kernel. (Real kernels: tests/integration/test_run.py and
// the papermill parity suite.)
#include "jupyter/execution_tracker.hpp"
#include "runner/notebook_engine.hpp"

#include <doctest/doctest.h>

using namespace kpool::runner;
namespace jupyter = kpool::jupyter;
using namespace std::chrono_literals;
using kpool::jupyter::channel;
using kpool::jupyter::execution_tracker;
using kpool::jupyter::incoming;

namespace {

incoming message(channel from, const std::string& type, const std::string& parent, json content) {
    kpool::protocol::wire_message msg =
        kpool::protocol::make_message(type, "kernel-session", std::move(content));
    msg.parent_header = {{"msg_id", parent}, {"msg_type", "execute_request"}};
    return {from, msg};
}

incoming iopub_status(const std::string& parent, const std::string& state) {
    return message(channel::iopub, "status", parent, {{"execution_state", state}});
}

incoming reply(const std::string& parent, const std::string& status_, json extra = json::object()) {
    json content = {{"status", status_}, {"execution_count", 1}};
    content.update(extra);
    return message(channel::shell, "execute_reply", parent, content);
}

json code(const std::string& source, std::vector<std::string> tags = {}) {
    return {{"cell_type", "code"},
            {"execution_count", nullptr},
            {"id", "c" + std::to_string(source.size())},
            {"metadata", {{"tags", tags}, {"papermill", json::object()}}},
            {"outputs", json::array()},
            {"source", source}};
}

json prepared(json cells) {
    json nb = {{"nbformat", 4},
               {"nbformat_minor", 5},
               {"metadata", {{"papermill", json::object()}}},
               {"cells", cells}};
    notebook_start(nb, wall_clock::now());
    return nb;
}

jupyter::execution ended(json reply_content) {
    kpool::jupyter::execution e;
    e.reply = std::move(reply_content);
    e.reply_header = {{"date", "2026-12-01T10:00:00.000000Z"}};
    return e;
}

// Runs every cell, each execution ending as `outcome(index)` says, with one stream output.
void run(notebook_engine& engine,
         const std::function<kpool::jupyter::execution(std::size_t)>& outcome) {
    while (const auto i = engine.next_cell()) {
        if (engine.begin_cell(wall_clock::now())) {
            engine.on_iopub(
                message(channel::iopub, "stream", "x", {{"name", "stdout"}, {"text", "out\n"}})
                    .msg);
            engine.on_executed(outcome(*i));
        }
        engine.end_cell(wall_clock::now());
    }
}

} // namespace

TEST_SUITE("execution_tracker") {
    const auto t0 = execution_tracker::clock::now();

    TEST_CASE("an execution ends with its reply and its idle status, in either order") {
        execution_tracker t("req", std::nullopt, t0);
        CHECK_FALSE(t.on_message(iopub_status("other", "idle"), t0)); // another request's
        CHECK(t.on_message(iopub_status("req", "busy"), t0));
        CHECK(t.on_message(iopub_status("req", "idle"), t0));
        CHECK_FALSE(t.finished(t0));
        CHECK(t.on_message(reply("req", "ok"), t0));
        CHECK(t.finished(t0));
        CHECK(t.result().reply["status"] == "ok");
        CHECK_FALSE(t.result().timed_out);
    }

    TEST_CASE("a reply whose idle never comes ends the wait after a grace period") {
        execution_tracker t("req", std::nullopt, t0);
        t.on_message(reply("req", "ok"), t0);
        CHECK_FALSE(t.finished(t0 + 4s));
        REQUIRE(t.next_deadline());
        CHECK(t.finished(*t.next_deadline()));
    }

    TEST_CASE("the time limit interrupts once, then waits for the interrupted cell's messages") {
        execution_tracker t("req", 2000ms, t0);
        CHECK(t.next_deadline() == t0 + 2000ms);
        CHECK_FALSE(t.on_tick(t0 + 1s, false));
        CHECK(t.on_tick(t0 + 2s, false));
        CHECK_FALSE(t.on_tick(t0 + 3s, false)); // once
        CHECK(t.result().timed_out);
        t.on_message(reply("req", "error", {{"ename", "KeyboardInterrupt"}}), t0 + 3s);
        t.on_message(iopub_status("req", "idle"), t0 + 3s);
        CHECK(t.finished(t0 + 3s));
    }

    TEST_CASE("a limit that passes after the reply is not a timeout") {
        execution_tracker t("req", 1000ms, t0);
        t.on_message(reply("req", "ok"), t0 + 500ms);
        CHECK_FALSE(t.on_tick(t0 + 2s, false));
        CHECK_FALSE(t.result().timed_out);
    }

    TEST_CASE("a cancel interrupts; an interrupt nobody answers ends the wait") {
        execution_tracker t("req", std::nullopt, t0);
        CHECK_FALSE(t.next_deadline());
        CHECK(t.on_tick(t0 + 1s, true));
        CHECK(t.result().cancelled);
        CHECK_FALSE(t.finished(t0 + 2s));
        CHECK(t.finished(t0 + 6s));
    }

    TEST_CASE("a dead kernel ends it at once") {
        execution_tracker t("req", std::nullopt, t0);
        t.kernel_died();
        CHECK(t.finished(t0));
        CHECK(t.result().kernel_died);
    }
}

TEST_SUITE("notebook_engine") {
    TEST_CASE("cells with nothing to run are started and completed without a request") {
        json markdown = {
            {"cell_type", "markdown"}, {"metadata", json::object()}, {"source", "# t"}};
        json nb =
            prepared({markdown, code("  \n"), code("x = 1", {"skip-execution"}), code("1 + 1")});
        notebook_engine engine(nb, {});
        std::vector<std::string> sent;
        while (engine.next_cell()) {
            if (auto request = engine.begin_cell(wall_clock::now())) {
                sent.push_back(request->code);
                CHECK(request->store_history);
                CHECK(request->stop_on_error);
                engine.on_executed(ended({{"status", "ok"}}));
            }
            engine.end_cell(wall_clock::now());
        }
        CHECK(sent == std::vector<std::string>{"1 + 1"});
        for (const json& cell : nb["cells"]) {
            CHECK(cell["metadata"]["papermill"]["status"] == "completed");
        }
        CHECK(engine.stop().outcome == run_outcome::ok);
    }

    TEST_CASE("outputs and nbclient's timing metadata come from iopub") {
        json nb = prepared({code("print('out')")});
        notebook_engine engine(nb, {});
        REQUIRE(engine.begin_cell(wall_clock::now()));
        engine.on_iopub(iopub_status("r", "busy").msg);
        engine.on_iopub(message(channel::iopub, "execute_input", "r",
                                {{"code", "print('out')"}, {"execution_count", 4}})
                            .msg);
        const json out = engine.on_iopub(
            message(channel::iopub, "stream", "r", {{"name", "stdout"}, {"text", "out\n"}}).msg);
        engine.on_iopub(iopub_status("r", "idle").msg);
        engine.on_executed(ended({{"status", "ok"}, {"execution_count", 4}}));
        engine.end_cell(wall_clock::now());
        CHECK(out["output_type"] == "stream");
        const json& cell = nb["cells"][0];
        CHECK(cell["execution_count"] == 4);
        CHECK(cell["outputs"].size() == 1);
        for (const char* key : {"iopub.status.busy", "iopub.execute_input", "iopub.status.idle",
                                "shell.execute_reply"}) {
            CHECK_MESSAGE(cell["metadata"]["execution"].contains(key), key);
        }
    }

    TEST_CASE("a cell that raises stops the run, is marked failed, and gets the error cells") {
        json nb = prepared({code("1"), code("raise ValueError"), code("3")});
        notebook_engine engine(nb, {});
        run(engine, [](std::size_t i) {
            return ended(i == 1 ? json{{"status", "error"}, {"ename", "ValueError"}, {"evalue", ""}}
                                : json{{"status", "ok"}});
        });
        CHECK(engine.stop().outcome == run_outcome::cell_failed);
        CHECK(engine.failed_cell() == 1);
        CHECK(nb["cells"][1]["metadata"]["papermill"]["exception"] == true);
        CHECK(nb["cells"][2]["metadata"]["papermill"]["status"] == "pending");
        engine.finish(wall_clock::now(), wall_clock::now());
        REQUIRE(nb["cells"].size() == 5); // the banner on top, the anchor before the cell
        CHECK(nb["cells"][0]["metadata"]["tags"] == json::array({error_marker_tag}));
        CHECK(nb["cells"][2]["metadata"]["tags"] == json::array({error_marker_tag}));
        CHECK(nb["metadata"]["papermill"]["exception"] == true);
    }

    TEST_CASE("allow_errors and raises-exception let the run go on") {
        for (bool allow : {true, false}) {
            json nb = prepared(
                {code("raise ValueError", allow ? std::vector<std::string>{}
                                                : std::vector<std::string>{"raises-exception"}),
                 code("2")});
            notebook_engine engine(nb, {.allow_errors = allow, .execution_timeout = std::nullopt});
            std::size_t ran = 0;
            while (engine.next_cell()) {
                if (auto request = engine.begin_cell(wall_clock::now())) {
                    CHECK(request->stop_on_error == (!allow && ran == 1));
                    engine.on_executed(
                        ended(ran == 0 ? json{{"status", "error"}, {"ename", "ValueError"}}
                                       : json{{"status", "ok"}}));
                    ++ran;
                }
                engine.end_cell(wall_clock::now());
            }
            CHECK(ran == 2);
            CHECK(engine.stop().outcome == run_outcome::ok);
        }
    }

    TEST_CASE("sys.exit(0) ends the run as a success, papermill's way") {
        json nb = prepared({code("import sys; sys.exit(0)"), code("2")});
        notebook_engine engine(nb, {});
        run(engine, [](std::size_t) {
            return ended({{"status", "error"}, {"ename", "SystemExit"}, {"evalue", "0"}});
        });
        CHECK(engine.stop().outcome == run_outcome::ok);
        CHECK(nb["cells"][0]["metadata"]["papermill"]["exception"] == true);
        CHECK(nb["cells"][1]["metadata"]["papermill"]["status"] == "pending");
        engine.finish(wall_clock::now(), wall_clock::now());
        CHECK(nb["cells"].size() == 2); // no error cells
    }

    TEST_CASE("a timeout, a dead kernel and a cancel stop the run without error cells") {
        struct way {
            std::function<void(kpool::jupyter::execution&)> make;
            run_outcome outcome;
            std::string says;
        };
        const std::vector<way> ways = {
            {[](kpool::jupyter::execution& e) { e.timed_out = true; }, run_outcome::cell_failed,
             "cell 0: A cell timed out while it was being executed, after 1.5 seconds (the kernel "
             "was interrupted)."},
            {[](kpool::jupyter::execution& e) { e.kernel_died = true; }, run_outcome::kernel_died,
             "the kernel died while running cell 0"},
            {[](kpool::jupyter::execution& e) { e.cancelled = true; }, run_outcome::interrupted,
             "interrupted while running cell 0"},
        };
        for (const way& w : ways) {
            json nb = prepared({code("while True: pass"), code("2")});
            notebook_engine engine(nb, {.allow_errors = false, .execution_timeout = 1500ms});
            run(engine, [&](std::size_t) {
                kpool::jupyter::execution e;
                w.make(e);
                return e;
            });
            CHECK(engine.stop().outcome == w.outcome);
            CHECK(engine.stop().message == w.says);
            CHECK(nb["cells"][0]["outputs"].size() == 1); // what it printed is kept
            CHECK(nb["cells"][0]["metadata"]["papermill"]["status"] == "completed");
            CHECK(engine.failed_cell() == -1);
            engine.finish(wall_clock::now(), wall_clock::now());
            CHECK(nb["cells"].size() == 2);
        }
    }
}
