// The cwd/env snippet: rendering is safe for any path or value, and the Python one really works
// (checked by running it with Debian's python3).
#include "daemon/kernel_context.hpp"

#include <doctest/doctest.h>

#include <algorithm>
#include <algorithm>
#include <cstdio>
#include <memory>

using namespace kpool::daemon;

TEST_SUITE("kernel_context") {
    TEST_CASE("rendering puts a JSON string literal where {context} is") {
        CHECK(render_context_snippet("f({context})", std::nullopt, {}) ==
              R"(f("{\"cwd\":null,\"env\":{}}"))");
        CHECK(render_context_snippet("{context}", "/a \"b\"", {{"K", "v\\n"}}) ==
              R"("{\"cwd\":\"/a \\\"b\\\"\",\"env\":{\"K\":\"v\\\\n\"}}")");
        // Non-ASCII leaves as \u escapes, valid in any language's string literal.
        const std::string literal = render_context_snippet("{context}", "/caf\xc3\xa9", {});
        CHECK(literal.find("\\u00e9") != std::string::npos);
        CHECK(std::all_of(literal.begin(), literal.end(),
                          [](char c) { return static_cast<unsigned char>(c) < 0x80; }));
    }

    TEST_CASE("only python has a built-in snippet") {
        CHECK(builtin_context_snippet("python").has_value());
        CHECK_FALSE(builtin_context_snippet("R").has_value());
    }

    TEST_CASE("the python snippet changes directory and environment, and leaves no names") {
        const std::string code = render_context_snippet(
            *builtin_context_snippet("python"), "/tmp", {{"KPOOL_T", "x \"y\" \xc3\xa9"}});
        const std::string script = "before = set(globals())\n" + code +
                                   "\nimport os\nprint(os.getcwd(), os.environ['KPOOL_T'], "
                                   "sorted(set(globals()) - before - {'before', 'os'}))\n";
        const std::string path = "/tmp/kpool-context-test.py";
        std::FILE* f = std::fopen(path.c_str(), "w");
        REQUIRE(f != nullptr);
        std::fputs(script.c_str(), f);
        std::fclose(f);
        std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(
            ::popen(("cd / && /usr/bin/python3 " + path).c_str(), "r"), ::pclose);
        REQUIRE(out != nullptr);
        char buf[256] = {};
        REQUIRE(std::fgets(buf, sizeof buf, out.get()) != nullptr);
        CHECK(std::string(buf) == "/tmp x \"y\" \xc3\xa9 []\n");
        std::remove(path.c_str());
    }
}
