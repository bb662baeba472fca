// protocol/python_json: JSON as Python's json module reads it (NaN, infinities, ints of any size)
// and big integers written back as digits. The notebook reader's use of it:
// tests/test_nbformat.cpp.
#include "protocol/python_json.hpp"

#include <doctest/doctest.h>

#include <cmath>
#include <limits>

using json = nlohmann::json;
using kpool::protocol::parse_python_json;
using kpool::protocol::to_json_text;

TEST_SUITE("python_json") {
    TEST_CASE("Python's constants count only as whole words") {
        for (const char* bad :
             {"[NaN1]", "[1NaN]", "[NaNa]", "[-NaN]", "[Infinityx]", "[nan]", "[NaN 1]"}) {
            CAPTURE(bad);
            CHECK_THROWS_AS(parse_python_json<json>(bad), json::parse_error);
        }
        const auto r =
            kpool::protocol::replace_python_constants(R"(["NaN", 1, NaN, -2, -Infinity])");
        CHECK(r.text == R"(["NaN", 1, 0.0, -2, -1.000000])");
        REQUIRE(r.replaced.size() == 2);
        CHECK(r.replaced[0].first == 1);
        CHECK(r.replaced[1].first == 3);
        CHECK(kpool::protocol::replace_python_constants(R"({"a": "\"NaN"})").replaced.empty());
    }

    TEST_CASE("a float beyond a double's range is an infinity, as Python reads it") {
        const json j =
            parse_python_json<json>("[1e400, -1.5E+999, 1e-400, 12345678901234567890123e300]");
        CHECK(j[0].get<double>() == std::numeric_limits<double>::infinity());
        CHECK(j[1].get<double>() == -std::numeric_limits<double>::infinity());
        CHECK(j[2].get<double>() == 0.0);
        CHECK(j[3].get<double>() == std::numeric_limits<double>::infinity());
        CHECK(kpool::protocol::parse_python_json_or_discarded<json>("[01e400]").is_discarded());
        CHECK(kpool::protocol::parse_python_json_or_discarded<json>("[1e400e1]").is_discarded());
    }

    TEST_CASE("a kernel message's big integer stays exact on the way out") {
        const json j = parse_python_json<json>(
            R"({"n": 1180591620717411303424, "m": [-99999999999999999999], "x": 1.5})");
        CHECK(to_json_text(j) ==
              R"({"m":[-99999999999999999999],"n":1180591620717411303424,"x":1.5})");
        CHECK(to_json_text(j, 1) == "{\n \"m\": [\n  -99999999999999999999\n ],\n \"n\": "
                                    "1180591620717411303424,\n \"x\": 1.5\n}");
        const json plain = {
            {"a", {1, 2}}, {"b", json::object()}, {"c", json::array()}, {"d", "\xff"}};
        CHECK(to_json_text(plain, 1) == plain.dump(1, ' ', false, json::error_handler_t::replace));
        json nested = plain;
        nested["z"] =
            json::array({kpool::protocol::integer_value<json>("123456789012345678901", false)});
        std::string expected = plain.dump(1, ' ', false, json::error_handler_t::replace);
        expected.insert(expected.size() - 2, ",\n \"z\": [\n  123456789012345678901\n ]");
        CHECK(to_json_text(nested, 1) == expected);
    }
}
