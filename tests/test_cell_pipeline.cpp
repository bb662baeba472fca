// runner/cell_pipeline driven by a scripted kernel: which requests go when (the set-up first, a
// window of cells, nothing behind a cell that may raise without stopping the kernel, one at a
// time for kernels that do not surely abort), and that notebook_engine still sees one cell at a
// time, in order, whatever order the kernel's messages come in. (Real kernels:
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
    std::vector<std::string> codes() const {
        std::vector<std::string> out;
        for (const sent_request& s : sent) {
            out.push_back(s.request.silent ? "<setup>" : s.request.code);
        }
        return out;
    }
};

incoming ahead_message(channel from, const std::string& type, const std::string& parent, json content) {
    kpool::protocol::wire_message msg = kpool::protocol::make_message(type, "kernel-session", std::move(content));
    msg.parent_header = {{"msg_id", parent}, {"msg_type", "execute_request"}};
    return {from, msg};
}

// Every message of one execution, in the kernel's order: busy, the code, a stream, reply, idle.
std::vector<incoming> ahead_execution(const std::string& id, const std::string& text, const std::string& status = "ok") {
    json reply = {{"status", status}, {"execution_count", 1}};
    if (status == "error") {
        reply.update({{"ename", "ValueError"}, {"evalue", "x"}, {"traceback", json::array()}});
    }
    return {ahead_message(channel::iopub, "status", id, {{"execution_state", "busy"}}),
            ahead_message(channel::iopub, "stream", id, {{"name", "stdout"}, {"text", text}}),
            ahead_message(channel::shell, "execute_reply", id, reply),
            ahead_message(channel::iopub, "status", id, {{"execution_state", "idle"}})};
}

json ahead_code(const std::string& source, std::vector<std::string> tags = {}) {
    return {{"cell_type", "code"}, {"execution_count", nullptr}, {"id", "c" + source},
            {"metadata", {{"tags", tags}, {"papermill", json::object()}}}, {"outputs", json::array()},
            {"source", source}};
}

json ahead_markdown(const std::string& source) {
    return {{"cell_type", "markdown"}, {"id", "m" + source}, {"metadata", {{"papermill", json::object()}}},
            {"source", source}};
}

json ahead_notebook(json cells) {
    json nb = {{"nbformat", 4}, {"nbformat_minor", 5}, {"metadata", {{"papermill", json::object()}}},
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
          pipeline(engine, kernel.sender(), window,
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
        deliver(ahead_execution(kernel.id_of(source), source + "!"), at);
    }
};

} // namespace cell_pipeline_tests
using namespace cell_pipeline_tests;

TEST_SUITE("cell_pipeline") {
    TEST_CASE("an ipykernel gets the set-up first, then a window of cells; each goes when one ends") {
        fixture f(json::array({ahead_code("a"), ahead_markdown("note"), ahead_code("b"), ahead_code("c"), ahead_code("d")}), 2, ipykernel);
        f.pipeline.start(f.t0);
        CHECK(f.kernel.codes() == std::vector<std::string>{"<setup>", "a", "b"});
        const auto& setup = f.kernel.sent[0].request;
        CHECK(setup.silent);
        CHECK_FALSE(setup.store_history);
        CHECK_FALSE(setup.stop_on_error); // its failure must not abort the cells behind it
        CHECK(f.kernel.sent[1].request.stop_on_error);
        f.run_ok("a", f.t0);
        CHECK(f.kernel.codes() == std::vector<std::string>{"<setup>", "a", "b", "c"});
        f.run_ok("b", f.t0);
        f.run_ok("c", f.t0);
        CHECK_FALSE(f.pipeline.finished(f.t0));
        f.run_ok("d", f.t0);
        CHECK(f.pipeline.finished(f.t0));
        CHECK(f.pipeline.sent_ahead() == 3);
        CHECK(f.order == std::vector<std::string>{"begin 0", "out a!", "end 0", "begin 1", "end 1", "begin 2",
                                                  "out b!", "end 2", "begin 3", "out c!", "end 3", "begin 4",
                                                  "out d!", "end 4"});
        CHECK(f.engine.stop().outcome == run_outcome::ok);
        CHECK(f.nb["cells"][4]["outputs"][0]["text"] == "d!");
    }

    TEST_CASE("a cell sent ahead whose messages come first still begins after the one before ends") {
        fixture f(json::array({ahead_code("a"), ahead_code("b")}), 4, ipykernel);
        f.pipeline.start(f.t0);
        f.run_ok("b", f.t0); // the kernel's messages for b, all of them, before any of a's
        CHECK(f.order == std::vector<std::string>{"begin 0"});
        CHECK(f.nb["cells"][1]["outputs"].empty());
        f.run_ok("a", f.t0);
        CHECK(f.pipeline.finished(f.t0));
        CHECK(f.order ==
              std::vector<std::string>{"begin 0", "out a!", "end 0", "begin 1", "out b!", "end 1"});
    }

    TEST_CASE("a cell that raises stops the run; what queued behind it is nobody's") {
        fixture f(json::array({ahead_code("a"), ahead_code("b"), ahead_code("c")}), 4, ipykernel);
        f.pipeline.start(f.t0);
        f.deliver(ahead_execution(f.kernel.id_of("a"), "a!", "error"), f.t0);
        CHECK(f.pipeline.finished(f.t0));
        CHECK(f.engine.stop().outcome == run_outcome::cell_failed);
        CHECK(f.engine.failed_cell() == 0);
        // The kernel's aborts of b and c change nothing.
        f.deliver({ahead_message(channel::shell, "execute_reply", f.kernel.id_of("b"), {{"status", "aborted"}})}, f.t0);
        CHECK(f.nb["cells"][1]["outputs"].empty());
        CHECK_FALSE(f.nb["cells"][1]["metadata"].contains("execution"));
        CHECK(f.order == std::vector<std::string>{"begin 0", "out a!", "end 0"});
    }

    TEST_CASE("nothing goes behind a cell that may raise without stopping the kernel") {
        SUBCASE("a raises-exception cell") {
            fixture f(json::array({ahead_code("a"), ahead_code("b", {"raises-exception"}), ahead_code("c")}), 4, ipykernel);
            f.pipeline.start(f.t0);
            CHECK(f.kernel.codes() == std::vector<std::string>{"<setup>", "a", "b"});
            f.run_ok("a", f.t0);
            CHECK(f.kernel.codes().size() == 3);
            f.deliver(ahead_execution(f.kernel.id_of("b"), "b!", "error"), f.t0);
            CHECK(f.kernel.codes() == std::vector<std::string>{"<setup>", "a", "b", "c"});
            f.run_ok("c", f.t0);
            CHECK(f.pipeline.finished(f.t0));
            CHECK(f.engine.stop().outcome == run_outcome::ok);
        }
        SUBCASE("allow_errors: every cell may, so one at a time and no set-up") {
            fixture f(json::array({ahead_code("a"), ahead_code("b")}), 4, ipykernel, {.allow_errors = true, .execution_timeout = {}});
            f.pipeline.start(f.t0);
            CHECK(f.kernel.codes() == std::vector<std::string>{"a"});
            f.deliver(ahead_execution(f.kernel.id_of("a"), "a!", "error"), f.t0);
            CHECK(f.kernel.codes() == std::vector<std::string>{"a", "b"});
            CHECK(f.pipeline.sent_ahead() == 0);
        }
    }

    TEST_CASE("a kernel that does not surely abort, or whose kernel_info has not come, gets one cell at a time") {
        SUBCASE("xeus-python") {
            fixture f(json::array({ahead_code("a"), ahead_code("b")}), 4, xeus);
            f.pipeline.start(f.t0);
            CHECK(f.kernel.codes() == std::vector<std::string>{"a"});
            f.run_ok("a", f.t0);
            CHECK(f.kernel.codes() == std::vector<std::string>{"a", "b"});
        }
        SUBCASE("kernel_info comes while the first cell runs: the set-up goes when nothing is queued") {
            fixture f(json::array({ahead_code("a"), ahead_code("b"), ahead_code("c")}), 4, json());
            f.pipeline.start(f.t0);
            CHECK(f.kernel.codes() == std::vector<std::string>{"a"});
            f.kernel.info = ipykernel;
            f.deliver({ahead_execution(f.kernel.id_of("a"), "a!")[0]}, f.t0); // busy: a message, not an end
            CHECK(f.kernel.codes() == std::vector<std::string>{"a"});
            f.run_ok("a", f.t0);
            CHECK(f.kernel.codes() == std::vector<std::string>{"a", "<setup>", "b", "c"});
        }
        SUBCASE("a window of 1: nbclient's way, no set-up") {
            fixture f(json::array({ahead_code("a"), ahead_code("b")}), 1, ipykernel);
            f.pipeline.start(f.t0);
            CHECK(f.kernel.codes() == std::vector<std::string>{"a"});
        }
    }

    TEST_CASE("a cell's time limit counts from when it begins, not from when it was sent") {
        fixture f(json::array({ahead_code("a"), ahead_code("b")}), 4, ipykernel, {.allow_errors = false, .execution_timeout = 1000ms});
        f.pipeline.start(f.t0);
        f.run_ok("a", f.t0 + 900ms); // b was sent at t0, begins now
        CHECK_FALSE(f.pipeline.on_tick(f.t0 + 1500ms, false));
        CHECK(f.pipeline.next_deadline() == f.t0 + 1900ms);
        CHECK(f.pipeline.on_tick(f.t0 + 1900ms, false)); // interrupt b
        f.deliver(ahead_execution(f.kernel.id_of("b"), "b!", "error"), f.t0 + 1950ms);
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
        CHECK(run_ahead_for(ipykernel)->setup.has_value());
        CHECK_FALSE(run_ahead_for(xeus).has_value());
        CHECK_FALSE(run_ahead_for({{"implementation", "IRkernel"}, {"language_info", {{"name", "R"}}}}).has_value());
        CHECK_FALSE(run_ahead_for(json()).has_value());
        CHECK_FALSE(run_ahead_for({{"implementation", "ipython"}}).has_value());
    }
}
