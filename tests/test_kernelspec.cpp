// Kernelspec discovery (search order, first match wins, case) and argv/env substitution.
#include "jupyter/kernelspec.hpp"

#include <doctest/doctest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

using namespace kpool::jupyter;
namespace fs = std::filesystem;

namespace {

struct temp_tree {
    fs::path root = fs::temp_directory_path() / ("kpool-spec-" + std::to_string(::getpid()));
    temp_tree() { fs::create_directories(root); }
    ~temp_tree() { fs::remove_all(root); }
    void spec(const std::string& dir, const std::string& name, const std::string& json) {
        fs::create_directories(root / dir / "kernels" / name);
        std::ofstream(root / dir / "kernels" / name / "kernel.json") << json;
    }
};

} // namespace

TEST_SUITE("kernelspec") {
    TEST_CASE("JUPYTER_PATH comes first, then the data dir; the first match wins") {
        temp_tree t;
        t.spec("a", "Echo", R"({"argv":["/bin/echo","A"],"display_name":"A","language":"x"})");
        t.spec("b", "echo", R"({"argv":["/bin/echo","B"],"display_name":"B"})");
        t.spec("data", "echo", R"({"argv":["/bin/echo","D"]})");
        t.spec("data", "only-data", R"({"argv":["/bin/true"]})");
        ::setenv("JUPYTER_PATH", ((t.root / "a").string() + ":" + (t.root / "b").string()).c_str(),
                 1);
        ::setenv("JUPYTER_DATA_DIR", (t.root / "data").string().c_str(), 1);
        auto path = kernelspec_search_path();
        REQUIRE(path.size() == 5);
        CHECK(path[0] == (t.root / "a" / "kernels").string());
        CHECK(path[2] == (t.root / "data" / "kernels").string());
        CHECK(path[4] == "/usr/share/jupyter/kernels");

        auto spec = find_kernelspec("echo");
        REQUIRE(spec.ok());
        CHECK(spec->display_name == "A"); // names are case-insensitive
        CHECK(spec->language == "x");
        CHECK(find_kernelspec("only-data").ok());
        CHECK_FALSE(find_kernelspec("missing").ok());

        auto all = list_kernelspecs();
        auto count = std::count_if(all.begin(), all.end(),
                                   [](const kernelspec& s) { return s.name == "echo"; });
        CHECK(count == 1);
        ::unsetenv("JUPYTER_PATH");
        ::unsetenv("JUPYTER_DATA_DIR");
    }

    TEST_CASE("a broken kernel.json is a clear error") {
        temp_tree t;
        t.spec("a", "bad", R"({"argv": []})");
        t.spec("a", "notjson", "{");
        ::setenv("JUPYTER_PATH", (t.root / "a").string().c_str(), 1);
        CHECK(find_kernelspec("bad").err().message ==
              "kernelspec 'bad': 'argv' must be a non-empty list of strings");
        CHECK(find_kernelspec("notjson").err().message.find("is not a JSON object") !=
              std::string::npos);
        ::unsetenv("JUPYTER_PATH");
    }

    TEST_CASE("argv placeholders are substituted, unknown ones kept") {
        kernelspec spec;
        spec.resource_dir = "/k/r";
        spec.argv = {"{prefix}/bin/python3", "-f", "{connection_file}", "--res={resource_dir}",
                     "{other}"};
        CHECK(format_argv(spec, "/run/c.json") ==
              std::vector<std::string>{"/usr/bin/python3", "-f", "/run/c.json", "--res=/k/r",
                                       "{other}"});
    }

    TEST_CASE("env values expand like Template.safe_substitute") {
        const std::map<std::string, std::string> env = {{"HOME", "/h"}, {"A_1", "x"}};
        CHECK(expand_env_value("${HOME}/lib", env) == "/h/lib");
        CHECK(expand_env_value("$HOME/lib:$A_1", env) == "/h/lib:x");
        CHECK(expand_env_value("$$HOME", env) == "$HOME");
        CHECK(expand_env_value("${MISSING}:$MISSING", env) == "${MISSING}:$MISSING");
        CHECK(expand_env_value("${HOME", env) == "${HOME");
        CHECK(expand_env_value("cost $5", env) == "cost $5");
        CHECK(expand_env_value("end$", env) == "end$");
    }
}
