// The cwd/env snippets: rendering is safe for any path or value, and each built-in snippet
// really works in its language where this machine has the interpreter (Python always; R and
// bash as Debian installs them for the integration tests), nothing left in the user's namespace.
#include "languages/language.hpp"

#include <doctest/doctest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <memory>

using namespace kpool::languages;

namespace {

// An awkward directory (quotes, a dollar, a backslash, non-ASCII) and value to apply.
const std::string awkward_dir = "/tmp/kpool ctx 'q' \"d\" $x \\b caf\xc3\xa9";
const std::string awkward_value = "x \"y\" 'z' $HOME \\n \xc3\xa9";

// Runs `program` on a script file holding `script`; its stdout.
std::string run_script(const std::string& program, const std::string& script) {
    const std::string path = "/tmp/kpool-context-test-" + std::to_string(::getpid());
    std::FILE* f = std::fopen(path.c_str(), "w");
    REQUIRE(f != nullptr);
    std::fputs(script.c_str(), f);
    std::fclose(f);
    std::unique_ptr<std::FILE, int (*)(std::FILE*)> out(
        ::popen(("cd / && " + program + " " + path + " 2>&1").c_str(), "r"), ::pclose);
    REQUIRE(out != nullptr);
    std::string text;
    char buf[512];
    while (std::fgets(buf, sizeof buf, out.get()) != nullptr) {
        text += buf;
    }
    std::remove(path.c_str());
    return text;
}

std::string code_for(const std::string& language) {
    auto code = builtin_context_code(language, {awkward_dir, {{"KPOOL_T", awkward_value}}});
    REQUIRE(code.ok());
    return *code;
}

} // namespace

TEST_SUITE("kernel_context") {
    TEST_CASE("rendering a template puts a JSON string literal where {context} is") {
        CHECK(render_context_snippet("f({context})", {}) == R"(f("{\"cwd\":null,\"env\":{}}"))");
        CHECK(render_context_snippet("{context}", {"/a \"b\"", {{"K", "v\\n"}}}) ==
              R"("{\"cwd\":\"/a \\\"b\\\"\",\"env\":{\"K\":\"v\\\\n\"}}")");
        // Non-ASCII leaves as \u escapes, valid in any language's string literal.
        const std::string literal = render_context_snippet("{context}", {"/caf\xc3\xa9", {}});
        CHECK(literal.find("\\u00e9") != std::string::npos);
        CHECK(std::all_of(literal.begin(), literal.end(),
                          [](char c) { return static_cast<unsigned char>(c) < 0x80; }));
    }

    TEST_CASE("built-in snippets exist for the languages of Debian's and common kernels") {
        for (const char* language :
             {"python", "Python", "R", "julia", "octave", "matlab", "bash"}) {
            CHECK(has_builtin_context_snippet(language));
        }
        CHECK_FALSE(has_builtin_context_snippet("fake"));
        CHECK(may_have_ipython_history("python"));
        CHECK_FALSE(may_have_ipython_history("R"));
        kernel_context history_only;
        history_only.memory_history = true;
        const std::string code = builtin_context_code("python", history_only).value();
        CHECK(code.find("\nexec(\"\\ntry:\\n    from IPython import get_ipython") !=
              std::string::npos);
        CHECK(code.ends_with(", {})"));
        CHECK(builtin_context_code("scala", {}).err().message ==
              "kpool has no cwd/env snippet for language 'scala'");
    }

    TEST_CASE("each snippet changes directory and environment and leaves no names") {
        REQUIRE(::mkdir(awkward_dir.c_str(), 0700) == 0);
        const std::string expected = awkward_dir + "\n" + awkward_value + "\n";
        SUBCASE("python") {
            CHECK(run_script("/usr/bin/python3",
                             "before = set(globals())\n" + code_for("python") +
                                 "\nimport os\nprint(os.getcwd())\nprint(os.environ['KPOOL_T'])\n"
                                 "print(sorted(set(globals()) - before - {'before', 'os'}))\n") ==
                  expected + "[]\n");
        }
        SUBCASE("R") {
            if (::access("/usr/bin/Rscript", X_OK) != 0) {
                MESSAGE("no Rscript here: the R snippet is checked by its text only");
                CHECK(code_for("R").starts_with("invisible(local({ setwd("));
            } else {
                CHECK(run_script("/usr/bin/Rscript",
                                 code_for("R") + "\ncat(getwd(), Sys.getenv('KPOOL_T'), "
                                                 "length(ls(all.names = TRUE)), sep = '\\n')\n") ==
                      expected + "0\n");
            }
        }
        SUBCASE("bash") {
            CHECK(run_script("/bin/bash", code_for("bash") +
                                              "\npwd\nprintf '%s\\n' \"$KPOOL_T\"\n") == expected);
            CHECK(builtin_context_code("bash", {std::nullopt, {{"A-B", "x"}}}).err().message ==
                  "env name 'A-B' cannot be exported by a shell");
        }
        ::rmdir(awkward_dir.c_str());
    }

    TEST_CASE("julia and octave snippets quote what their languages would read specially") {
        const std::string julia = builtin_context_code("julia", {"/a$b", {{"K", "\"v\""}}}).value();
        CHECK(julia == R"(let; cd("/a\$b"); ENV["K"] = "\"v\""; nothing; end)");
        const std::string octave =
            builtin_context_code("octave", {"/a\\b", {{"K", "x\ny"}}}).value();
        CHECK(octave == R"(cd("/a\\b"); setenv("K", "x\ny"); )");
    }
}
