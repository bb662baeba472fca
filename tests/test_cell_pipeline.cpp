// runner/cell_pipeline driven by a scripted kernel: which requests go when (the first cell alone
// with the abort window's expression, then a window of cells, nothing behind a cell that may
// raise without stopping the kernel, one at a time for kernels that do not surely abort), and
// that notebook_engine still sees one cell at a time, in order, whatever order the kernel's
// messages come in. (Real kernels:
// tests/integration/test_cells_ahead.py and the papermill parity suite.)
#include "runner/cell_pipeline.hpp"
#include "runner/papermill.hpp"

#include <doctest/doctest.h>

#include <string>
#include <vector>

using namespace kpool::runner;
namespace jupyter = kpool::jupyter;
using namespace std::chrono_literals;
using jupyter::channel;
using jupyter::incoming;
using clock_type = jupyter::execution_driver::clock;

namespace cell_pipeline_tests {

struct sent_request {
    std::string id;
    jupyter::execute_request request;
};

// What the pipeline sent, and messages made for it as a kernel would.
struct scripted_kernel {
    std::vector<sent_request> sent;
    json info;

    jupyter::send_execute_fn sender() {
        return [this](const jupyter::execute_request& r) {
            sent.push_back({"m" + std::to_string(sent.size()), r});
            return sent.back().id;
        };
    }
    // The msg_id of the request with this code.
    std::string id_of(const std::string& code) const {
        for (const sent_request& s : sent) {
            if (s.request.code == code) {
                return s.id;
            }
        }
        FAIL("never sent: " << code);
        return {};
    }
    const jupyter::execute_request& request_of(const std::string& code) const {
        for (const sent_request& s : sent) {
            if (s.request.code == code) {
                return s.request;
            }
        }
        FAIL("never sent: " << code);
        return sent.front().request;
    }
    std::vector<std::string> codes() const {
        std::vector<std::string> out;
        for (const sent_request& s : sent) {
            out.push_back(s.request.code);
        }
        return out;
    }
};

incoming ahead_message(channel from, const std::string& type, const std::string& parent,
                       json content) {
    kpool::protocol::wire_message msg =
        kpool::protocol::make_message(type, "kernel-session", std::move(content));
    msg.parent_header = {{"msg_id", parent}, {"msg_type", "execute_request"}};
    return {from, msg};
}

// Every message of one execution, in the kernel's order: busy, the code, a stream, reply, idle.
std::vector<incoming> ahead_execution(const std::string& id, const std::string& text,
                                      const std::string& status = "ok",
                                      const json& expressions = json::object()) {
    json reply = {{"status", status}, {"execution_count", 1}, {"user_expressions", json::object()}};
    if (status == "error") {
        reply.update({{"ename", "ValueError"}, {"evalue", "x"}, {"traceback", json::array()}});
    } else {
        for (const auto& [name, expression] : expressions.items()) { // as ipykernel evaluates them
            reply["user_expressions"][name] = {{"status", "ok"},
                                               {"data", {{"text/plain", "None"}}}};
        }
    }
    return {ahead_message(channel::iopub, "status", id, {{"execution_state", "busy"}}),
            ahead_message(channel::iopub, "stream", id, {{"name", "stdout"}, {"text", text}}),
            ahead_message(channel::shell, "execute_reply", id, reply),
            ahead_message(channel::iopub, "status", id, {{"execution_state", "idle"}})};
}

json ahead_code(const std::string& source, std::vector<std::string> tags = {}) {
    return {
        {"cell_type", "code"},      {"execution_count", nullptr},
        {"id", "c" + source},       {"metadata", {{"tags", tags}, {"papermill", json::object()}}},
        {"outputs", json::array()}, {"source", source}};
}

json ahead_markdown(const std::string& source) {
    return {{"cell_type", "markdown"},
            {"id", "m" + source},
            {"metadata", {{"papermill", json::object()}}},
            {"source", source}};
}

json ahead_notebook(json cells) {
    json nb = {{"nbformat", 4},
               {"nbformat_minor", 5},
               {"metadata", {{"papermill", json::object()}}},
               {"cells", cells}};
    notebook_start(nb, wall_clock::now());
    return nb;
}

const json ipykernel = {{"implementation", "ipython"}, {"language_info", {{"name", "python"}}}};
const json xeus = {{"implementation", "xeus-python"}, {"language_info", {{"name", "python"}}}};

struct fixture {
    json nb;
    notebook_engine engine;
    scripted_kernel kernel;
    std::vector<std::string> order; // "begin N", "out N TEXT", "end N"
    cell_pipeline pipeline;
    clock_type::time_point t0 = clock_type::now();

    fixture(json cells, std::size_t window, json info, engine_settings settings = {})
        : nb(ahead_notebook(std::move(cells))), engine(nb, settings), kernel{{}, std::move(info)},
          pipeline(
              engine, kernel.sender(), window,
              {.kernel_info = [this]() -> const json& { return kernel.info; },
               .began = [this](std::size_t i) { order.push_back("begin " + std::to_string(i)); },
               .ended = [this](std::size_t i) { order.push_back("end " + std::to_string(i)); },
               .iopub =
                   [this](const kpool::protocol::wire_message&, const json& out) {
                       if (!out.is_null()) {
                           order.push_back("out " + out.value("text", ""));
                       }
                   }}) {}

    void deliver(const std::vector<incoming>& messages, clock_type::time_point at) {
        for (const incoming& in : messages) {
            pipeline.on_message(in, at);
        }
    }
    void run_ok(const std::string& source, clock_type::time_point at) {
        deliver(ahead_execution(kernel.id_of(source), source + "!", "ok",
                                kernel.request_of(source).user_expressions),
                at);
    }
};

} // namespace cell_pipeline_tests
using namespace cell_pipeline_tests;

TEST_SUITE("cell_pipeline") {
    TEST_CASE(
        "an ipykernel's first cell widens its abort window alone, then a window of cells goes") {
        fixture f(json::array({ahead_code("a"), ahead_markdown("note"), ahead_code("b"),
                               ahead_code("c"), ahead_code("d")}),
                  2, ipykernel);
        f.pipeline.start(f.t0);
        CHECK(f.kernel.codes() == std::vector<std::string>{"a"});
        const json& expressions = f.kernel.sent[0].request.user_expressions;
        REQUIRE(expressions.size() == 1);
        CHECK(expressions.begin().value().get<std::string>().find("stop_on_error_timeout") !=
              std::string::npos);
        CHECK(f.kernel.sent[0].request.stop_on_error);
        f.run_ok("a", f.t0);
        CHECK(f.kernel.codes() == std::vector<std::string>{"a", "b", "c"});
        CHECK(f.kernel.request_of("b").user_expressions.empty()); // once is enough
        f.run_ok("b", f.t0);
        CHECK(f.kernel.codes() == std::vector<std::string>{"a", "b", "c", "d"});
        f.run_ok("c", f.t0);
        CHECK_FALSE(f.pipeline.finished(f.t0));
        f.run_ok("d", f.t0);
        CHECK(f.pipeline.finished(f.t0));
        CHECK(f.pipeline.sent_ahead() == 2);
        CHECK(f.order == std::vector<std::string>{"begin 0", "out a!", "end 0", "begin 1", "end 1",
                                                  "begin 2", "out b!", "end 2", "begin 3", "out c!",
                                                  "end 3", "begin 4", "out d!", "end 4"});
        CHECK(f.engine.stop().outcome == run_outcome::ok);
        CHECK(f.nb["cells"][4]["outputs"][0]["text"] == "d!");
    }

    TEST_CASE("the window is asked for on the first cell that others may follow") {
        fixture f(
            json::array({ahead_code("a", {"raises-exception"}), ahead_code("b"), ahead_code("c")}),
            4, ipykernel);
        f.pipeline.start(f.t0);
        CHECK(f.kernel.request_of("a").user_expressions.empty()); // nothing may follow it
        f.deliver(ahead_execution(f.kernel.id_of("a"), "a!", "error"), f.t0); // allowed
        CHECK(f.kernel.codes() == std::vector<std::string>{"a", "b"});
        CHECK_FALSE(f.kernel.request_of("b").user_expressions.empty()); // asked again
        f.run_ok("b", f.t0);
        CHECK(f.kernel.codes() == std::vector<std::string>{"a", "b", "c"});
    }

    TEST_CASE(
        "a cell sent ahead whose messages come first still begins after the one before ends") {
        fixture f(json::array({ahead_code("a"), ahead_code("b"), ahead_code("c")}), 4, ipykernel);
        f.pipeline.start(f.t0);
        f.run_ok("a", f.t0);
        f.run_ok("c", f.t0); // the kernel's messages for c, all of them, before any of b's
        CHECK(f.order == std::vector<std::string>{"begin 0", "out a!", "end 0", "begin 1"});
        CHECK(f.nb["cells"][2]["outputs"].empty());
        f.run_ok("b", f.t0);
        CHECK(f.pipeline.finished(f.t0));
        CHECK(f.order == std::vector<std::string>{"begin 0", "out a!", "end 0", "begin 1", "out b!",
                                                  "end 1", "begin 2", "out c!", "end 2"});
    }

    TEST_CASE("a cell that raises stops the run; what queued behind it is nobody's") {
        fixture f(json::array({ahead_code("a"), ahead_code("b"), ahead_code("c"), ahead_code("d")}),
                  4, ipykernel);
        f.pipeline.start(f.t0);
        f.run_ok("a", f.t0);
        CHECK(f.kernel.codes() == std::vector<std::string>{"a", "b", "c", "d"});
        f.deliver(ahead_execution(f.kernel.id_of("b"), "b!", "error"), f.t0);
        CHECK(f.pipeline.finished(f.t0));
        CHECK(f.engine.stop().outcome == run_outcome::cell_failed);
        CHECK(f.engine.failed_cell() == 1);
        // The kernel's aborts of c and d change nothing.
        f.deliver({ahead_message(channel::shell, "execute_reply", f.kernel.id_of("c"),
                                 {{"status", "aborted"}})},
                  f.t0);
        CHECK(f.nb["cells"][2]["outputs"].empty());
        CHECK_FALSE(f.nb["cells"][2]["metadata"].contains("execution"));
        CHECK(f.order ==
              std::vector<std::string>{"begin 0", "out a!", "end 0", "begin 1", "out b!", "end 1"});
    }

    TEST_CASE("nothing goes behind a cell that may raise without stopping the kernel") {
        SUBCASE("a raises-exception cell") {
            fixture f(json::array({ahead_code("a"), ahead_code("b"),
                                   ahead_code("c", {"raises-exception"}), ahead_code("d")}),
                      4, ipykernel);
            f.pipeline.start(f.t0);
            f.run_ok("a", f.t0);
            CHECK(f.kernel.codes() == std::vector<std::string>{"a", "b", "c"});
            f.run_ok("b", f.t0);
            CHECK(f.kernel.codes().size() == 3);
            f.deliver(ahead_execution(f.kernel.id_of("c"), "c!", "error"), f.t0);
            CHECK(f.kernel.codes() == std::vector<std::string>{"a", "b", "c", "d"});
            f.run_ok("d", f.t0);
            CHECK(f.pipeline.finished(f.t0));
            CHECK(f.engine.stop().outcome == run_outcome::ok);
        }
        SUBCASE("allow_errors: every cell may, so one at a time") {
            fixture f(json::array({ahead_code("a"), ahead_code("b"), ahead_code("c")}), 4,
                      ipykernel, {.allow_errors = true, .execution_timeout = {}});
            f.pipeline.start(f.t0);
            CHECK(f.kernel.request_of("a").user_expressions.empty()); // the kernel left as it is
            f.run_ok("a", f.t0);
            CHECK(f.kernel.codes() == std::vector<std::string>{"a", "b"});
            f.deliver(ahead_execution(f.kernel.id_of("b"), "b!", "error"), f.t0);
            CHECK(f.kernel.codes() == std::vector<std::string>{"a", "b", "c"});
            CHECK(f.pipeline.sent_ahead() == 0);
        }
    }

    TEST_CASE("a kernel that does not surely abort, or whose kernel_info has not come, gets one "
              "cell at a time") {
        SUBCASE("xeus-python") {
            fixture f(json::array({ahead_code("a"), ahead_code("b"), ahead_code("c")}), 4, xeus);
            f.pipeline.start(f.t0);
            CHECK(f.kernel.request_of("a").user_expressions.empty());
            f.run_ok("a", f.t0);
            CHECK(f.kernel.codes() == std::vector<std::string>{"a", "b"});
        }
        SUBCASE("kernel_info comes while the first cell runs: the next cell asks for the window") {
            fixture f(
                json::array({ahead_code("a"), ahead_code("b"), ahead_code("c"), ahead_code("d")}),
                4, json());
            f.pipeline.start(f.t0);
            CHECK(f.kernel.request_of("a").user_expressions.empty());
            f.kernel.info = ipykernel;
            f.run_ok("a", f.t0);
            CHECK(f.kernel.codes() == std::vector<std::string>{"a", "b"});
            CHECK_FALSE(f.kernel.request_of("b").user_expressions.empty());
            f.run_ok("b", f.t0);
            CHECK(f.kernel.codes() == std::vector<std::string>{"a", "b", "c", "d"});
        }
        SUBCASE("a window of 1: nbclient's way, nothing asked of the kernel") {
            fixture f(json::array({ahead_code("a"), ahead_code("b")}), 1, ipykernel);
            f.pipeline.start(f.t0);
            CHECK(f.kernel.request_of("a").user_expressions.empty());
            f.run_ok("a", f.t0);
            CHECK(f.kernel.codes() == std::vector<std::string>{"a", "b"});
        }
    }

    TEST_CASE("a cell's time limit counts from when it begins, not from when it was sent") {
        fixture f(json::array({ahead_code("a"), ahead_code("b"), ahead_code("c")}), 4, ipykernel,
                  {.allow_errors = false, .execution_timeout = 1000ms});
        f.pipeline.start(f.t0);
        f.run_ok("a", f.t0);         // b and c are sent now
        f.run_ok("b", f.t0 + 900ms); // c begins now
        CHECK_FALSE(f.pipeline.on_tick(f.t0 + 1500ms, false));
        CHECK(f.pipeline.next_deadline() == f.t0 + 1900ms);
        CHECK(f.pipeline.on_tick(f.t0 + 1900ms, false)); // interrupt c
        f.deliver(ahead_execution(f.kernel.id_of("c"), "c!", "error"), f.t0 + 1950ms);
        CHECK(f.pipeline.finished(f.t0 + 1950ms));
        CHECK(f.engine.stop().outcome == run_outcome::cell_failed);
        CHECK(f.engine.failed_cell() == -1); // a timeout: no error cells
    }

    TEST_CASE("a cancel interrupts the running cell; a dead kernel ends the run at once") {
        SUBCASE("cancel") {
            fixture f(json::array({ahead_code("a"), ahead_code("b")}), 4, ipykernel);
            f.pipeline.start(f.t0);
            CHECK(f.pipeline.on_tick(f.t0, true));
            f.deliver(ahead_execution(f.kernel.id_of("a"), "a!", "error"), f.t0);
            CHECK(f.pipeline.finished(f.t0));
            CHECK(f.engine.stop().outcome == run_outcome::interrupted);
        }
        SUBCASE("death") {
            fixture f(json::array({ahead_code("a"), ahead_code("b")}), 4, ipykernel);
            f.pipeline.start(f.t0);
            f.pipeline.kernel_died(f.t0);
            CHECK(f.pipeline.finished(f.t0));
            CHECK(f.engine.stop().outcome == run_outcome::kernel_died);
        }
    }

    TEST_CASE("which kernels may have cells sent ahead") {
        CHECK(run_ahead_for(ipykernel).has_value());
        CHECK_FALSE(run_ahead_for(ipykernel)->abort_window_expression.empty());
        CHECK_FALSE(run_ahead_for(xeus).has_value());
        CHECK_FALSE(
            run_ahead_for({{"implementation", "IRkernel"}, {"language_info", {{"name", "R"}}}})
                .has_value());
        CHECK_FALSE(run_ahead_for(json()).has_value());
        CHECK_FALSE(run_ahead_for({{"implementation", "ipython"}}).has_value());
    }
}
