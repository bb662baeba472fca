// cli/duration: one syntax for every command's durations; bare numbers keep each option's unit.
#include "cli/duration.hpp"

#include <doctest/doctest.h>

using namespace kpool::cli;
using namespace std::chrono_literals;

TEST_SUITE("durations") {
    TEST_CASE("a unit means the same everywhere; a bare number is the option's own unit") {
        for (const auto bare : {bare_unit::milliseconds, bare_unit::seconds}) {
            CHECK(parse_duration("500ms", bare)->value == 500ms);
            CHECK(parse_duration("5s", bare)->value == 5s);
            CHECK(parse_duration("1.5s", bare)->value == 1500ms);
            CHECK(parse_duration("2m", bare)->value == 120s);
            CHECK(parse_duration("1h", bare)->value == 3600s);
            CHECK_FALSE(parse_duration("5s", bare)->bare);
        }
        CHECK(parse_duration("5000", bare_unit::milliseconds)->value == 5000ms);
        CHECK(parse_duration("5000", bare_unit::milliseconds)->bare);
        CHECK(parse_duration("30", bare_unit::seconds)->value == 30s);
        CHECK(parse_duration("0.25", bare_unit::seconds)->value == 250ms);
        CHECK(parse_duration("0.0001", bare_unit::seconds)->value ==
              1ms); // never rounded to nothing
    }

    TEST_CASE("what is not a duration") {
        for (const char* text :
             {"", "-1", "5 s", "5sec", "s", "inf", "nan", "1e400", " 5", "5S", "+5", "400d"}) {
            CAPTURE(text);
            CHECK_FALSE(parse_duration(text, bare_unit::seconds));
        }
        CHECK_FALSE(parse_duration("0", bare_unit::seconds));
        CHECK(parse_duration("0", bare_unit::milliseconds, true)->value == 0ms);
        CHECK(parse_duration("0s", bare_unit::seconds, true)->value == 0ms);
        CHECK(duration_usage("--timeout", "x", bare_unit::milliseconds) ==
              "--timeout takes a duration such as 500ms, 5s, 1.5m or 2h (a bare number is "
              "milliseconds), not 'x'");
    }
}
