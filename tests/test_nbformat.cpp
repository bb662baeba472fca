// notebook/nbformat: Python's splitlines rules, reading (joined lines, transient keys dropped,
// diagnostics with line:col) and writing (split lines, indent 1, sorted keys, UTF-8 kept).
// Byte-for-byte agreement with Python's nbformat on a corpus is checked by
// tests/integration/test_nbformat.py.
#include "notebook/nbformat.hpp"
#include "protocol/big_integer.hpp"
#include "protocol/python_json.hpp"

#include <cmath>
#include <cstdint>
#include <limits>

#include <doctest/doctest.h>

using namespace kpool::notebook;
using json = nlohmann::json;

TEST_SUITE("nbformat") {
    TEST_CASE("split_lines keeps line ends, as str.splitlines(True)") {
        CHECK(split_lines("") == std::vector<std::string>{});
        CHECK(split_lines("a") == std::vector<std::string>{"a"});
        CHECK(split_lines("a\nb\n") == std::vector<std::string>{"a\n", "b\n"});
        CHECK(split_lines("a\r\nb\rc") == std::vector<std::string>{"a\r\n", "b\r", "c"});
        CHECK(split_lines("a\x0b"
                          "b\x0c"
                          "c\x1c"
                          "d") == std::vector<std::string>{"a\x0b", "b\x0c", "c\x1c", "d"});
        CHECK(split_lines("x\xc2\x85y\xe2\x80\xa8z\xe2\x80\xa9") ==
              std::vector<std::string>{"x\xc2\x85", "y\xe2\x80\xa8", "z\xe2\x80\xa9"});
        CHECK(split_lines("caf\xc3\xa9\n") == std::vector<std::string>{"caf\xc3\xa9\n"});
    }

    TEST_CASE("reading joins split fields and drops transient keys") {
        auto nb = read_notebook(R"({"nbformat": 4, "nbformat_minor": 5,
            "metadata": {"signature": "x", "kernelspec": {"name": "python3"}},
            "cells": [{"cell_type": "code", "id": "a", "metadata": {"trusted": true},
                       "source": ["x = 1\n", "x"], "execution_count": null,
                       "outputs": [{"output_type": "stream", "name": "stdout", "text": ["a\n", "b"]},
                                   {"output_type": "display_data", "metadata": {},
                                    "data": {"text/plain": ["1\n", "2"],
                                             "application/json": ["kept", "as is"]}}]}]})",
                                "t.ipynb");
        REQUIRE(nb.ok());
        const json& cell = (*nb)["cells"][0];
        CHECK(cell["source"] == "x = 1\nx");
        CHECK(cell["outputs"][0]["text"] == "a\nb");
        CHECK(cell["outputs"][1]["data"]["text/plain"] == "1\n2");
        CHECK(cell["outputs"][1]["data"]["application/json"] == json::array({"kept", "as is"}));
        CHECK_FALSE(cell["metadata"].contains("trusted"));
        CHECK_FALSE((*nb)["metadata"].contains("signature"));
    }

    TEST_CASE("what is not a notebook is refused with where and why") {
        CHECK(read_notebook("{\n  \"cells\": [,]\n}", "bad.ipynb")
                  .err()
                  .message.starts_with("bad.ipynb:2:13: not valid JSON"));
        CHECK(read_notebook("[]", "a.ipynb").err().message ==
              "a.ipynb: not a notebook (the JSON is not an object)");
        CHECK(read_notebook(R"({"nbformat": 3, "cells": []})", "v3.ipynb").err().message ==
              "v3.ipynb: not an nbformat 3 notebook (no 'worksheets' list)");
        CHECK(read_notebook(R"({"nbformat": 2, "cells": []})", "v2.ipynb").err().message ==
              "v2.ipynb: not an nbformat 4 notebook (nbformat is 2)");
    }

    TEST_CASE("writing splits lines, sorts keys, indents by one and keeps UTF-8") {
        const json nb = {{"nbformat", 4},
                         {"nbformat_minor", 4},
                         {"metadata", json::object()},
                         {"cells", json::array({{{"cell_type", "markdown"},
                                                 {"metadata", json::object()},
                                                 {"source", "# caf\xc3\xa9\nline \"2\""}}})}};
        CHECK(write_notebook(nb) == "{\n"
                                    " \"cells\": [\n"
                                    "  {\n"
                                    "   \"cell_type\": \"markdown\",\n"
                                    "   \"metadata\": {},\n"
                                    "   \"source\": [\n"
                                    "    \"# caf\xc3\xa9\\n\",\n"
                                    "    \"line \\\"2\\\"\"\n"
                                    "   ]\n"
                                    "  }\n"
                                    " ],\n"
                                    " \"metadata\": {},\n"
                                    " \"nbformat\": 4,\n"
                                    " \"nbformat_minor\": 4\n"
                                    "}\n");
    }

    TEST_CASE("floats are written as Python's repr, the shortest that reads back") {
        nlohmann::json nb = {{"cells", nlohmann::json::array()},
                             {"metadata",
                              {{"d", 11508 / 1e6},
                               {"big", 1e16},
                               {"small", 1e-5},
                               {"whole", 3.0},
                               {"nan", std::nan("")}}},
                             {"nbformat", 4},
                             {"nbformat_minor", 4}};
        const std::string text = kpool::notebook::write_notebook(nb);
        CHECK(text.find("\"d\": 0.011508,") != std::string::npos); // not 0.011507999999999999
        CHECK(text.find("\"big\": 1e+16,") != std::string::npos);
        CHECK(text.find("\"small\": 1e-05,") != std::string::npos);
        CHECK(text.find("\"whole\": 3.0\n") != std::string::npos);
        CHECK(text.find("\"nan\": NaN,") != std::string::npos);
    }

    TEST_CASE("an integer beyond 64 bits is written as its digits") {
        nlohmann::json nb = {{"cells", nlohmann::json::array()},
                             {"metadata",
                              {{"n", kpool::protocol::integer_value<nlohmann::json>(
                                         "123456789012345678901234567890", true)}}},
                             {"nbformat", 4},
                             {"nbformat_minor", 4}};
        const std::string text = kpool::notebook::write_notebook(nb);
        CHECK(text.find("\"n\": -123456789012345678901234567890\n") != std::string::npos);
    }

    TEST_CASE("what Python writes reads back: NaN, infinities and integers of any size") {
        auto nb = read_notebook(R"({"nbformat": 4, "nbformat_minor": 5, "cells": [],
            "metadata": {"papermill": {"parameters": {"x": NaN, "y": Infinity, "z": -Infinity,
                         "big": -123456789012345678901234567890, "u": 18446744073709551615,
                         "s": "NaN Infinity", "f": 1.5e300}}}})",
                                "rerun.ipynb");
        REQUIRE(nb.ok());
        const json& p = (*nb)["metadata"]["papermill"]["parameters"];
        CHECK(std::isnan(p["x"].get<double>()));
        CHECK(p["y"].get<double>() == std::numeric_limits<double>::infinity());
        CHECK(p["z"].get<double>() == -std::numeric_limits<double>::infinity());
        REQUIRE(kpool::protocol::is_big_integer(p["big"]));
        CHECK(kpool::protocol::big_integer_digits(p["big"]) == "-123456789012345678901234567890");
        CHECK(p["u"].get<std::uint64_t>() == 18446744073709551615ULL);
        CHECK(p["s"] == "NaN Infinity");
        CHECK(p["f"].get<double>() == 1.5e300);
        const std::string text = write_notebook(*nb);
        CHECK(text.find("\"big\": -123456789012345678901234567890,") != std::string::npos);
        CHECK(text.find("\"x\": NaN,") != std::string::npos);
        CHECK(text.find("\"z\": -Infinity\n") != std::string::npos);
        // The stand-ins for NaN and Infinity keep their length: errors point where they were.
        CHECK(read_notebook("{\"a\": [NaN,\n  Infinity, x]}", "p.ipynb")
                  .err()
                  .message.starts_with("p.ipynb:2:13: not valid JSON"));
    }
}
