// runner/papermill: the injected cell's place, the run metadata, papermill's times and the error
// marker cells, checked on small notebooks.
#include "runner/papermill.hpp"

#include <doctest/doctest.h>

using namespace kpool::runner;

namespace {

json code_cell(const std::string& source, std::vector<std::string> tags = {}) {
    return {
        {"cell_type", "code"},
        {"execution_count", 7},
        {"metadata", {{"tags", tags}}},
        {"outputs", json::array({{{"output_type", "stream"}, {"name", "stdout"}, {"text", "x"}}})},
        {"source", source}};
}

json notebook(json cells, int minor = 5) {
    return {
        {"nbformat", 4}, {"nbformat_minor", minor}, {"metadata", json::object()}, {"cells", cells}};
}

} // namespace

TEST_SUITE("papermill") {
    TEST_CASE(
        "the injected cell goes after the parameters cell, replaces an injected one, or tops") {
        std::vector<std::string> warnings;
        json nb = notebook({code_cell("a"), code_cell("p", {"parameters"}), code_cell("b")});
        inject_parameters(nb, "# Parameters\nx = 1\n", warnings);
        REQUIRE(nb["cells"].size() == 4);
        CHECK(nb["cells"][2]["source"] == "# Parameters\nx = 1\n");
        CHECK(nb["cells"][2]["metadata"]["tags"] == json::array({"injected-parameters"}));
        CHECK(nb["cells"][2]["id"].get<std::string>().size() == 8);
        CHECK(nb["cells"][2]["outputs"] == json::array());
        inject_parameters(nb, "# Parameters\nx = 2\n", warnings);
        CHECK(nb["cells"].size() == 4);
        CHECK(nb["cells"][2]["source"] == "# Parameters\nx = 2\n");
        CHECK(warnings.empty());
        json old = notebook({code_cell("a")}, 4);
        inject_parameters(old, "# Parameters\n", warnings);
        CHECK(old["cells"][0]["source"] == "# Parameters\n");
        CHECK_FALSE(old["cells"][0].contains("id")); // 4.4 stays 4.4
        CHECK(warnings == std::vector<std::string>{
                              "Input notebook does not contain a cell with tag 'parameters'"});
    }

    TEST_CASE("a run resets cells and keeps papermill's times") {
        json nb =
            notebook({code_cell("a"),
                      {{"cell_type", "markdown"}, {"metadata", json::object()}, {"source", "m"}}});
        const auto t0 = wall_clock::time_point(std::chrono::seconds(1764480000)) +
                        std::chrono::microseconds(250);
        notebook_start(nb, t0);
        CHECK(nb["metadata"]["papermill"]["start_time"] == "2025-11-30T05:20:00.000250");
        CHECK(nb["cells"][0]["execution_count"].is_null());
        CHECK(nb["cells"][0]["outputs"] == json::array());
        CHECK(nb["cells"][1]["metadata"]["papermill"]["status"] == "pending");
        cell_start(nb["cells"][0], t0);
        cell_complete(nb["cells"][0], t0 + std::chrono::milliseconds(1500));
        CHECK(nb["cells"][0]["metadata"]["papermill"]["duration"] == 1.5);
        CHECK(nb["cells"][0]["metadata"]["papermill"]["status"] == "completed");
        CHECK(papermill_time(wall_clock::time_point(std::chrono::seconds(1764480000))) ==
              "2025-11-30T05:20:00");
        notebook_complete(nb, t0, t0 + std::chrono::seconds(2));
        CHECK(nb["metadata"]["papermill"]["duration"] == 2.0);
        CHECK(nb["cells"][1]["metadata"]["papermill"]["status"] == "completed");
    }

    TEST_CASE("message times are rewritten with six digits and a Z, as nbclient does") {
        CHECK(message_time({{"date", "2026-11-30T05:41:14.869Z"}}) ==
              "2026-11-30T05:41:14.869000Z");
        CHECK(message_time({{"date", "2026-11-30T05:41:14.123456+00:00"}}) ==
              "2026-11-30T05:41:14.123456Z");
    }

    TEST_CASE("an error leaves the banner at the top and the anchor before the failing cell") {
        json nb = notebook({code_cell("a"), code_cell("b")});
        insert_error_cells(nb, 1, 2);
        REQUIRE(nb["cells"].size() == 4);
        CHECK(nb["cells"][0]["cell_type"] == "markdown");
        CHECK(nb["cells"][0]["source"].get<std::string>().find("In [2]</a>") != std::string::npos);
        CHECK(nb["cells"][2]["source"].get<std::string>().find("id=\"papermill-error-cell\"") !=
              std::string::npos);
        CHECK(nb["cells"][2]["metadata"]["tags"] == json::array({"papermill-error-cell-tag"}));
        CHECK(nb["cells"][3]["source"] == "b");
    }
}
