// The zygote line protocol (protocol/zygote_protocol.hpp): requests out, messages in, lines split.
#include "protocol/zygote_protocol.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

using namespace kpool::protocol::zygote;

TEST_SUITE("zygote protocol") {
    TEST_CASE("a fork request is one line of JSON with every field") {
        fork_request r{.id = 7,
                       .args = {"-f", "/run/k.json"},
                       .connection_file = "/run/k.json",
                       .env = {{"HOME", "/root"}, {"X", "a\nb"}},
                       .cwd = "",
                       .log = "/run/z1-7.log",
                       .limits = {{9, 1024}},
                       .idle = true,
                       .sandbox = {},
                       .sandbox_helper = {}};
        const std::string line = format(r);
        REQUIRE(line.back() == '\n');
        CHECK(line.find('\n') == line.size() - 1); // a newline in a value stays escaped
        const auto j = nlohmann::json::parse(line);
        CHECK(j["fork"] == 7);
        CHECK(j["args"] == nlohmann::json::array({"-f", "/run/k.json"}));
        CHECK(j["connection_file"] == "/run/k.json");
        CHECK(j["env"]["X"] == "a\nb");
        CHECK(j["limits"] == nlohmann::json::parse("[[9, 1024]]"));
        CHECK(j["idle"] == true);
    }

    TEST_CASE("a preload plan is JSON, the pool's prefault with it") {
        const preload_plan plan{
            .modules = {"pandas"}, .max_mb = 256, .request_env = {"TZ"}, .prefault = "start"};
        CHECK(
            nlohmann::json::parse(format(plan)) ==
            nlohmann::json::parse(
                R"({"modules": ["pandas"], "max_mb": 256, "request_env": ["TZ"], "prefault": "start",
                                        "imports_every_s": 60})"));
    }

    TEST_CASE("the zygote's settings are one JSON object, its only argument") {
        settings s{.pool = "py",
                   .socket = "/run/kpool/z1",
                   .startup_code = "import json",
                   .args = std::vector<std::string>{"-f", "{connection_file}"},
                   .prime = false,
                   .preload = preload_plan{.modules = {"numpy"},
                                           .max_mb = 512,
                                           .request_env = {},
                                           .prefault = "learn",
                                           .imports_every_s = 60},
                   .helpers = {{"zygote_kernel.py", "x = 1\n"}}};
        const auto j = nlohmann::json::parse(format(s));
        CHECK(j["pool"] == "py");
        CHECK(j["socket"] == "/run/kpool/z1");
        CHECK(j["startup_code"] == "import json");
        CHECK(j["args"] == nlohmann::json::array({"-f", "{connection_file}"}));
        CHECK(j["prime"] == false);
        CHECK(j["preload"] == nlohmann::json::parse(format(s.preload)));
        CHECK(j["helpers"] == nlohmann::json{{"zygote_kernel.py", "x = 1\n"}});
        s.args.reset(); // a kernelspec the zygote cannot pre-build for
        CHECK(nlohmann::json::parse(format(s))["args"].is_null());
    }

    TEST_CASE("each message kind parses into its type") {
        auto ready_msg = parse(
            R"({"ready": 12, "threads": 1, "prebuilt": false, "why_not": "ipykernel 7.0 is not 6.x"})");
        REQUIRE(ready_msg);
        const auto& r = std::get<ready>(*ready_msg);
        CHECK(r.pid == 12);
        CHECK_FALSE(r.prebuilt);
        CHECK(r.why_not == "ipykernel 7.0 is not 6.x");

        auto old_ready = parse(R"({"ready": 12, "threads": 3})"); // the first zygote's form
        REQUIRE(old_ready);
        CHECK(std::get<ready>(*old_ready).threads == 3);

        auto f = parse(R"({"forked": 3, "pid": 99, "prebuilt": true, "why_not": null})");
        REQUIRE(f);
        CHECK(std::get<forked>(*f).request == 3);
        CHECK(std::get<forked>(*f).prebuilt);
        CHECK(std::get<forked>(*f).why_not.empty());
        CHECK_FALSE(std::get<forked>(*f).at_idle);
        auto idle = parse(
            R"({"forked": 4, "pid": 98, "prebuilt": true, "why_not": null, "at_idle": true})");
        REQUIRE(idle.ok());
        CHECK(std::get<forked>(*idle).at_idle);
        CHECK_FALSE(parse(R"({"forked": 4, "pid": 98, "at_idle": "yes"})").ok());

        auto failed_msg = parse(R"({"failed": 4, "error": "fork: [Errno 11]"})");
        REQUIRE(failed_msg);
        CHECK(std::get<fork_failed>(*failed_msg).error == "fork: [Errno 11]");

        auto e = parse(R"({"exited": 99, "code": 0, "signal": 9})");
        REQUIRE(e);
        CHECK(std::get<exited>(*e).term_signal == 9);

        auto l = parse(R"({"learned": 3120, "why_not": null})");
        REQUIRE(l);
        CHECK(std::get<learned>(*l).pages == 3120);
        CHECK(std::get<learned>(*l).kernels == 0);
        auto lives = parse(R"({"learned": 5200, "why_not": null, "kernels": 3})");
        REQUIRE(lives);
        CHECK(std::get<learned>(*lives).kernels == 3);
        CHECK_FALSE(parse(R"({"learned": 5200, "kernels": "three"})"));

        auto pre =
            parse(R"({"ready": 7, "threads": 1, "prebuilt": true, "why_not": null, "preload": {
            "preloaded": [{"name": "pandas", "file": "/usr/lib/python3/dist-packages/pandas/__init__.py", "mtime": 1.5e9}],
            "refused": [["grpc", "starts a thread at import"]], "warmed": ["pandas"],
            "warm_ups_refused": [["matplotlib", "leaves a figure open"]], "growth_mb": 61.5, "rss_mb": 120.25}})");
        REQUIRE(pre);
        const preload_report& report = std::get<ready>(*pre).preload;
        REQUIRE(report.preloaded.size() == 1);
        CHECK(report.preloaded[0].name == "pandas");
        CHECK(report.preloaded[0].mtime == doctest::Approx(1.5e9));
        CHECK(report.refused.at(0).second == "starts a thread at import");
        CHECK(report.warmed == std::vector<std::string>{"pandas"});
        CHECK(report.warm_ups_refused.at(0).first == "matplotlib");
        CHECK(report.growth_mb == doctest::Approx(61.5));

        auto used = parse(
            R"j({"imports": 321, "modules": ["numpy", "pandas"], "other": [["utils", "not an installed module (found in /home/u/nb)"]]})j");
        REQUIRE(used);
        CHECK(std::get<imports>(*used).pid == 321);
        CHECK(std::get<imports>(*used).modules == std::vector<std::string>{"numpy", "pandas"});
        CHECK(std::get<imports>(*used).other.at(0).first == "utils");
        CHECK_FALSE(std::get<imports>(*used).running);
        auto sampled = parse(R"({"imports": 321, "modules": [], "other": [], "running": true})");
        REQUIRE(sampled);
        CHECK(std::get<imports>(*sampled).running);
        CHECK_FALSE(parse(R"({"imports": 321, "modules": [], "running": "yes"})"));

        auto c = parse(R"({"error": "unreadable request"})");
        REQUIRE(c);
        CHECK(std::get<complaint>(*c).error == "unreadable request");
    }

    TEST_CASE("malformed lines are errors that say what is wrong, never a crash") {
        for (const char* line :
             {"", "not json", "[1,2]", "{}", R"({"forked": "3", "pid": 9})",
              R"({"forked": 3, "pid": -1})", R"({"forked": 3})", R"({"exited": 9, "code": 0})",
              R"({"ready": 1})", R"({"learned": -5})",
              R"({"ready": 1, "threads": 1, "prebuilt": "yes"})", R"({"error": 5})",
              "{\"forked\": 1, \"pid\": 2", R"({"imports": 1, "modules": [1]})",
              R"({"imports": 1, "other": [["a"]]})", R"({"imports": "1", "modules": []})",
              R"({"ready": 1, "threads": 1, "preload": {"preloaded": [{"file": "x"}]}})",
              R"({"ready": 1, "threads": 1, "preload": {"refused": "all"}})"}) {
            CAPTURE(line);
            auto m = parse(line);
            REQUIRE_FALSE(m);
            CHECK(m.err().message.starts_with("zygote message: "));
        }
    }

    TEST_CASE("lines are split across reads, and an overlong line is dropped whole") {
        line_splitter split(10);
        CHECK(split.feed("ab").empty());
        CHECK(split.feed("c\nde\n\nf") == std::vector<std::string>{"abc", "de", ""});
        CHECK(split.feed("0123456789ABC").empty()); // "f" + 13 bytes: too long
        CHECK(split.feed("DEF\nok\n") == std::vector<std::string>{"ok"});
        CHECK(split.dropped() == 1);
        split.feed("partial");
        split.reset();
        CHECK(split.feed("x\n") == std::vector<std::string>{"x"});
    }
}
