// The priming executes per language (languages/language.hpp): what each sends, and that none
// can count or be stored (test_priming.py checks the kernels themselves).
#include "languages/language.hpp"

#include <doctest/doctest.h>

using kpool::languages::priming_requests;

TEST_SUITE("kernel priming") {
    TEST_CASE(
        "python is two silent cells (one with a user expression), R three loud unstored ones") {
        for (const char* language : {"python", "Python", "python3"}) {
            const auto python = priming_requests(language);
            REQUIRE(python.size() == 2);
            CHECK(python[0]["silent"] == true);
            CHECK(python[0]["user_expressions"].size() == 1);
            // The second reads what a loud first cell would make: the shell's
            // ast_node_interactivity and its history's lazy traits.
            CHECK(python[1]["silent"] == true);
            const std::string code = python[1]["code"];
            CHECK(code.find("ast_node_interactivity") != std::string::npos);
            CHECK(code.find("db_input_cache") != std::string::npos);
        }
        const auto r = priming_requests("R");
        REQUIRE(r.size() == 3);
        for (const auto& request : r) {
            CHECK(request["silent"] == false);
        }
        CHECK(priming_requests("octave").empty());
        CHECK(priming_requests("fake").empty());
    }

    TEST_CASE("no priming request is stored in history") {
        for (const char* language : {"python", "R"}) {
            for (const auto& request : priming_requests(language)) {
                CHECK(request["store_history"] == false);
                CHECK(request["allow_stdin"] == false);
            }
        }
    }
}
