// notebook/outputs: nbclient's rules for turning iopub messages into cell outputs.
#include "notebook/outputs.hpp"

#include <doctest/doctest.h>

using namespace kpool::notebook;
using json = nlohmann::json;
using kpool::protocol::wire_message;

namespace {

wire_message msg(const std::string& type, json content) {
    wire_message m;
    m.header = {{"msg_type", type}, {"msg_id", "m"}};
    m.content = std::move(content);
    return m;
}

json two_cells() {
    return json::array({{{"cell_type", "code"}, {"outputs", json::array()}},
                        {{"cell_type", "code"}, {"outputs", json::array()}}});
}

} // namespace

TEST_SUITE("outputs") {
    TEST_CASE("one output per message, execution counts, status and inputs ignored") {
        json cells = two_cells();
        output_builder b(cells);
        b.apply(msg("status", {{"execution_state", "busy"}}), 0);
        b.apply(msg("execute_input", {{"code", "x"}, {"execution_count", 3}}), 0);
        b.apply(msg("stream", {{"name", "stdout"}, {"text", "a"}}), 0);
        b.apply(msg("stream", {{"name", "stdout"}, {"text", "b"}}), 0);
        b.apply(msg("execute_result", {{"data", {{"text/plain", "1"}}},
                                       {"metadata", json::object()},
                                       {"execution_count", 3}}),
                0);
        b.apply(msg("comm_open", {{"comm_id", "c"}}), 0);
        const json& outs = cells[0]["outputs"];
        REQUIRE(outs.size() == 3);
        CHECK(outs[0] == json{{"output_type", "stream"}, {"name", "stdout"}, {"text", "a"}});
        CHECK(outs[2]["execution_count"] == 3);
        CHECK(cells[0]["execution_count"] == 3);
    }

    TEST_CASE("clear_output now, or with wait at the next output (even in the next cell)") {
        json cells = two_cells();
        output_builder b(cells);
        b.apply(msg("stream", {{"name", "stdout"}, {"text", "a"}}), 0);
        b.apply(msg("clear_output", {{"wait", false}}), 0);
        CHECK(cells[0]["outputs"].empty());
        b.apply(msg("stream", {{"name", "stdout"}, {"text", "b"}}), 0);
        b.apply(msg("clear_output", {{"wait", true}}), 0);
        CHECK(cells[0]["outputs"].size() == 1);
        b.apply(msg("stream", {{"name", "stdout"}, {"text", "c"}}), 0);
        REQUIRE(cells[0]["outputs"].size() == 1);
        CHECK(cells[0]["outputs"][0]["text"] == "c");
    }

    TEST_CASE("display updates reach every output of that display_id in every cell") {
        json cells = two_cells();
        output_builder b(cells);
        const json transient = {{"display_id", "d"}};
        b.apply(msg("display_data", {{"data", {{"text/plain", "1"}}},
                                     {"metadata", json::object()},
                                     {"transient", transient}}),
                0);
        b.apply(msg("display_data", {{"data", {{"text/plain", "2"}}},
                                     {"metadata", json::object()},
                                     {"transient", transient}}),
                1);
        // A display_data with a known id updates the earlier ones and is appended as well.
        CHECK(cells[0]["outputs"][0]["data"]["text/plain"] == "2");
        b.apply(msg("update_display_data", {{"data", {{"text/plain", "3"}}},
                                            {"metadata", {{"k", 1}}},
                                            {"transient", transient}}),
                1);
        CHECK(cells[0]["outputs"][0]["data"]["text/plain"] == "3");
        CHECK(cells[1]["outputs"][0]["data"]["text/plain"] == "3");
        CHECK(cells[1]["outputs"][0]["metadata"]["k"] == 1);
        CHECK(cells[1]["outputs"].size() == 1); // an update is not an output
        CHECK_FALSE(cells[0]["outputs"][0].contains("transient"));
    }

    TEST_CASE("errors keep ename, evalue and the traceback") {
        json out =
            output_from_msg("error", {{"ename", "E"}, {"evalue", "v"}, {"traceback", {"t"}}});
        CHECK(
            out ==
            json{{"output_type", "error"}, {"ename", "E"}, {"evalue", "v"}, {"traceback", {"t"}}});
        CHECK(output_from_msg("comm_msg", json::object()).is_null());
    }
}
