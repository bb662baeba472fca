// params/: papermill's CLI typing, PyYAML's implicit types, Python's float repr, and every
// translator's literals (expected texts are what papermill's translators produce).
#include "languages/language.hpp"
#include "params/translators.hpp"
#include "params/values.hpp"
#include "protocol/big_integer.hpp"

#include <doctest/doctest.h>

#include <cmath>

using namespace kpool::params;
using kpool::languages::translator_for;
using kpool::languages::translator_names;
using ojson = nlohmann::ordered_json;

TEST_SUITE("params") {
    TEST_CASE("-p values are typed as papermill's _resolve_type does") {
        CHECK(resolve_cli_value("True") == true);
        CHECK(resolve_cli_value("False") == false);
        CHECK(resolve_cli_value("None").is_null());
        CHECK(resolve_cli_value("true") == "true"); // only Python's spellings
        CHECK(resolve_cli_value("42") == 42);
        CHECK(resolve_cli_value(" -7 ") == -7);
        CHECK(resolve_cli_value("1_000") == 1000);
        CHECK(resolve_cli_value("0.5") == 0.5);
        CHECK(resolve_cli_value("1e3") == 1000.0);
        CHECK(std::isnan(resolve_cli_value("nan").get<double>()));
        CHECK(resolve_cli_value("-inf").get<double>() == -HUGE_VAL);
        CHECK(resolve_cli_value("0x10") == "0x10");
        CHECK(resolve_cli_value("abc") == "abc");
        CHECK(resolve_cli_value("") == "");
    }

    TEST_CASE("integers beyond 64 bits stay exact, as Python's int") {
        const ojson big = resolve_cli_value("-123_456789012345678901234567890");
        REQUIRE(kpool::protocol::is_big_integer(big));
        CHECK(kpool::protocol::big_integer_digits(big) == "-123456789012345678901234567890");
        CHECK(resolve_cli_value("9223372036854775807") ==
              9223372036854775807LL); // int64 max stays a number
        CHECK(kpool::protocol::is_big_integer(resolve_cli_value("9223372036854775808")));
        CHECK(resolve_cli_value("-0") == 0);
        CHECK(resolve_cli_value("007") == 7);
        auto p = parse_yaml_parameters(
            "h: 0x1ffffffffffffffffffff\ns: 99999999999999999999:30\n"
            "i: !!int 1234567890123456789012345\nf: !!float 123456789012345678901\n"
            "b: -0b1111111111111111111111111111111111111111111111111111111111111111\n",
            "big.yaml");
        REQUIRE(p.ok());
        CHECK(kpool::protocol::big_integer_digits((*p)["h"]) == "2417851639229258349412351");
        CHECK(kpool::protocol::big_integer_digits((*p)["s"]) ==
              "5999999999999999999970"); // no crash
        CHECK(kpool::protocol::big_integer_digits((*p)["i"]) == "1234567890123456789012345");
        CHECK((*p)["f"].get<double>() == 123456789012345678901.0);
        CHECK(kpool::protocol::big_integer_digits((*p)["b"]) == "-18446744073709551615");
        const ojson values = ojson{{"n", big}};
        CHECK(*translator_for("python", "")->codify(values) ==
              "# Parameters\nn = -123456789012345678901234567890\n");
        CHECK(*translator_for("R", "")->codify(values) ==
              "# Parameters\nn = -123456789012345678901234567890\n");
        CHECK(*translator_for("scala", "")->codify(values) ==
              "// Parameters\nval n = -123456789012345678901234567890L\n");
    }

    TEST_CASE("decimal arithmetic for big integers") {
        using kpool::protocol::decimal_digits;
        CHECK(decimal_digits("ff", 16) == "255");
        CHECK(decimal_digits("000", 10) == "0");
        CHECK(decimal_digits("12", 2).empty()); // not binary digits
        CHECK(decimal_digits("", 10).empty());
        CHECK(kpool::protocol::decimal_multiply_add("99", 60, 59) == "5999");
    }

    TEST_CASE("YAML is typed as PyYAML's safe loader types it, without dates") {
        auto p =
            parse_yaml_parameters("a: yes\nb: 0x1f\nc: 1.5\nd: 1e3\ne: ~\nf: '12'\ng: 2026-01-01\n"
                                  "h: [1, two, .inf]\ni: {k: off}\nj: 010\nk: -0b11\n",
                                  "p.yaml");
        REQUIRE(p.ok());
        CHECK((*p)["a"] == true);
        CHECK((*p)["b"] == 31);
        CHECK((*p)["c"] == 1.5);
        CHECK((*p)["d"] == "1e3"); // YAML 1.1 floats need a dot
        CHECK((*p)["e"].is_null());
        CHECK((*p)["f"] == "12");
        CHECK((*p)["g"] == "2026-01-01");
        CHECK((*p)["h"][1] == "two");
        CHECK((*p)["h"][2].get<double>() == HUGE_VAL);
        CHECK((*p)["i"]["k"] == false);
        CHECK((*p)["j"] == 8);
        CHECK((*p)["k"] == -3);
        CHECK(parse_yaml_parameters("", "e.yaml")->empty());
        // YAML 1.1's base 60 and explicit tags, as PyYAML reads them.
        auto t =
            parse_yaml_parameters("s: 1:30\nf: -1:30.5\nstr: !!str 5\nfl: !!float 3\n", "t.yaml");
        REQUIRE(t.ok());
        CHECK((*t)["s"] == 90);
        CHECK((*t)["f"].get<double>() == -90.5);
        CHECK((*t)["str"] == "5");
        CHECK((*t)["fl"].is_number_float());
        CHECK(parse_yaml_parameters("x: !!int abc\n", "b.yaml").err().message ==
              "b.yaml:1:4: 'abc' is not a int");
        CHECK(parse_yaml_parameters("[1]", "l.yaml").err().message ==
              "l.yaml: parameters must be a YAML mapping of names to values");
        CHECK(parse_yaml_parameters("a: [1,\n", "bad.yaml").err().message.starts_with("bad.yaml:"));
    }

    TEST_CASE("floats print as Python's repr") {
        CHECK(python_float_repr(0.1) == "0.1");
        CHECK(python_float_repr(3.0) == "3.0");
        CHECK(python_float_repr(-2.5) == "-2.5");
        CHECK(python_float_repr(1e16) == "1e+16");
        CHECK(python_float_repr(1234567890123456.0) == "1234567890123456.0");
        CHECK(python_float_repr(1e-5) == "1e-05");
        CHECK(python_float_repr(0.0001) == "0.0001");
        CHECK(python_float_repr(1.5e300) == "1.5e+300");
        CHECK(python_float_repr(std::nan("")) == "nan");
        CHECK(python_float_repr(-HUGE_VAL) == "-inf");
    }

    kpool::result<std::string> codify(const char* lang, const ojson& values) {
        return translator_for(lang, "")->codify(values);
    }
    std::set<std::string> names(const char* lang, const std::string& source) {
        return translator_for(lang, "")->assigned_names(source);
    }

    TEST_CASE("translators are found by kernel name, then language") {
        CHECK(std::string(translator_for("python3", "python")->name()) == "python");
        CHECK(std::string(translator_for("ir", "R")->name()) == "R");
        CHECK(std::string(translator_for("sparkkernel", "x")->name()) == "scala");
        CHECK(std::string(translator_for("octave", "octave")->name()) == "matlab");
        CHECK(translator_for("xr", "fake") == nullptr); // an error for the caller, not Python
        CHECK(std::string(translator_for(".net-csharp", "C#")->name()) == ".net-csharp");
        CHECK(translator_names() ==
              ".net-csharp, .net-fsharp, .net-powershell, R, bash, julia, matlab, "
              "octave, pysparkkernel, python, scala, sparkkernel, sparkrkernel");
    }

    TEST_CASE("each language's literals, as papermill writes them") {
        const ojson values = ojson::parse(
            R"({"s": "a \"q\" 'b' \\ \n é 😀", "i": 3, "big": 3000000000, "f": 0.5, "t": true,
                "n": null, "l": [1, "x"], "d": {"k": 1.0}})");
        CHECK(*codify("python", values) == "# Parameters\n"
                                           "s = \"a \\\"q\\\" 'b' \\\\ \\n \\xe9 \\U0001f600\"\n"
                                           "i = 3\nbig = 3000000000\nf = 0.5\nt = True\nn = "
                                           "None\nl = [1, \"x\"]\nd = {\"k\": 1.0}\n");
        CHECK(*codify("R", values) ==
              "# Parameters\n"
              "s = \"a \\\"q\\\" 'b' \\\\ \\n \\xe9 \\U0001f600\"\n"
              "i = 3\nbig = 3000000000\nf = 0.5\nt = TRUE\nn = NULL\nl = list(1, \"x\")\n"
              "d = list(\"k\" = 1.0)\n");
        const ojson simple = ojson::parse(R"({"i": 3, "big": 3000000000, "t": false, "n": null,
                                              "l": [1, "x y"], "d": {"k": "v"}})");
        CHECK(*codify("julia", simple) ==
              "# Parameters\ni = 3\nbig = 3000000000\nt = false\nn = nothing\nl = [1, \"x y\"]\n"
              "d = Dict(\"k\" => \"v\")\n");
        CHECK(*codify("scala", simple) ==
              "// Parameters\nval i = 3\nval big = 3000000000L\nval t = false\nval n = None\n"
              "val l = Seq(1, \"x y\")\nval d = Map(\"k\" -> \"v\")\n");
        CHECK(*codify("matlab", simple) ==
              "% Parameters\ni = 3;\nbig = 3000000000;\nt = false;\nn = NaN;\nl = {1, \"x y\"};\n"
              "d = containers.Map({'k'}, {\"v\"});\n");
        const ojson shell = ojson::parse(R"({"a": "plain", "b": "it's", "c": "", "n": null,
                                             "l": [1, "x y"]})");
        CHECK(*codify("bash", shell) ==
              "# Parameters\na=plain\nb='it'\"'\"'s'\nc=''\nn=\nl=(1 'x y')\n");
        CHECK(codify("bash", ojson::parse(R"({"d": {"k": 1}})")).err().message ==
              "a dict parameter cannot be written in bash");
        CHECK(*codify("R", ojson::parse(R"({"__x": 1})")) == "# Parameters\nx = 1\n");
        CHECK(*codify("python", ojson{{"x", std::nan("")}}) == "# Parameters\nx = float('nan')\n");
    }

    TEST_CASE(".NET's three languages, as papermill writes them") {
        // The expected texts are papermill 2.6.0's own codify() output for these values.
        const ojson simple = ojson::parse(R"({"i": 3, "big": 3000000000, "t": false, "f": 0.5,
                                              "l": [1, "x y"], "d": {"k": "v", "q": "a\"b"}})");
        CHECK(*codify(".net-csharp", simple) ==
              "// Parameters\nvar i = 3;\nvar big = 3000000000L;\nvar t = false;\nvar f = 0.5;\n"
              "var l = new [] { 1, \"x y\" };\n"
              "var d = new Dictionary<string,Object>{ { \"k\" , \"v\" }, { \"q\" , \"a\\\"b\" } "
              "};\n");
        CHECK(*codify(".net-fsharp", simple) ==
              "(* Parameters *)\nlet i = 3\nlet big = 3000000000L\nlet t = false\nlet f = 0.5\n"
              "let l = [ 1; \"x y\" ]\n"
              "let d = [ (\"k\", \"v\" :> IComparable); (\"q\", \"a\\\"b\" :> IComparable) ] |> "
              "Map.ofList\n");
        CHECK(*codify(".net-powershell", simple) ==
              "# Parameters\n$i = 3\n$big = 3000000000\n$t = $False\n$f = 0.5\n$l = @(1, \"x y\")\n"
              "$d = @{\"k\" = \"v\"\n \"q\" = \"a`\"b\"}\n");
        const ojson edges = ojson::parse(R"({"n": null, "e": [], "z": {}})");
        CHECK(*codify(".net-fsharp", edges) ==
              "(* Parameters *)\nlet n = None\nlet e = [  ]\nlet z = [  ] |> Map.ofList\n");
        CHECK(*codify(".net-powershell",
                      ojson{{"n", nullptr}, {"x", std::nan("")}, {"y", -HUGE_VAL}}) ==
              "# Parameters\n$n = $Null\n$x = [double]::NaN\n$y = [double]::NegativeInfinity\n");
        CHECK(*codify(".net-csharp",
                      ojson{{"e", ojson::array()}, {"z", ojson::object()}, {"x", HUGE_VAL}}) ==
              "// Parameters\nvar e = new [] {  };\nvar z = new Dictionary<string,Object>{  "
              "};\nvar x = inf;\n");
        // papermill: NotImplementedError("Option type not implemented for C#.")
        CHECK(codify(".net-csharp", edges).err().message ==
              "a None parameter cannot be written in .net-csharp");
        CHECK(names(".net-csharp", "var x = 1;\ny = 2;\n") == std::set<std::string>{"x", "y"});
        CHECK(names(".net-fsharp", "let x = 1\nlet mutable y = 2\n") ==
              std::set<std::string>{"x", "y"});
        CHECK(names(".net-powershell", "$x = 1\n$y=2\n") == std::set<std::string>{"x", "y"});
    }

    TEST_CASE("papermill's inspection of a Python parameters cell (--help-notebook)") {
        const auto found = *translator_for("python3", "python")
                                ->inspect("# Parameters\nalpha = 0.1  # the learning rate\nn: int "
                                          "= 3\nname: 'str' = \"x\"\n"
                                          "items = [\n  1,  # one\n  2,\n]  # the items\nbad = a "
                                          "== b\nk = 4 # type: int  and help\n");
        REQUIRE(found.size() == 5);
        CHECK(found[0].name == "alpha");
        CHECK(found[0].inferred_type_name == "None");
        CHECK(found[0].default_value == "0.1");
        CHECK(found[0].help == "the learning rate");
        CHECK(found[1].inferred_type_name == "int");
        CHECK(found[2].inferred_type_name == "str");
        CHECK(found[2].default_value == "\"x\"");
        CHECK(found[3].default_value == "[1,2,]");
        CHECK(found[3].help == "the items");
        CHECK(found[4].name == "k");
        CHECK(found[4].inferred_type_name == "int");
        CHECK(found[4].help == "and help");
        CHECK_FALSE(translator_for("ir", "R")->inspect("x = 1").has_value()); // as papermill
    }

    TEST_CASE("the names a parameters cell assigns") {
        CHECK(names("python", "# comment\nalpha = 0.1\nn: int = 3\nif x == 1:\n  pass\n") ==
              std::set<std::string>{"alpha", "n"});
        CHECK(names("R", "alpha <- 0.1\nbeta = 2\n") == std::set<std::string>{"alpha", "beta"});
        CHECK(names("bash", "x=1\nexport y=2\n") == std::set<std::string>{"x", "y"});
    }
}
