// The config's key tables (config/config_keys.hpp) against the documented example file, and the
// reload effects their rows give.
#include "config/config.hpp"
#include "config/config_keys.hpp"

#include <doctest/doctest.h>

#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>

using namespace kpool::config;

namespace {

// Each table of the example file by its name with pool names as NAME ("pools.NAME.limits"):
// the keys it sets or shows in a comment ("#   size = \"auto\"").
std::map<std::string, std::set<std::string>> example_keys() {
    std::ifstream in(std::string(KPOOL_SOURCE_DIR) + "/config/kpool.example.toml");
    REQUIRE(in);
    const std::regex header(R"(^\[([A-Za-z0-9_.-]+)\]\s*$)");
    const std::regex key(R"(^#?\s*([a-z_]+)\s*=)");
    std::map<std::string, std::set<std::string>> out;
    std::string section;
    for (std::string line; std::getline(in, line);) {
        std::smatch m;
        if (std::regex_match(line, m, header)) {
            section = std::regex_replace(m[1].str(), std::regex(R"(^pools\.[^.]+)"), "pools.NAME");
        } else if (!section.empty() && std::regex_search(line, m, key)) {
            out[section].insert(m[1].str());
        }
    }
    return out;
}

config config_of(const std::string& text) {
    auto cfg = parse_config(text, "t.toml");
    REQUIRE_MESSAGE(cfg.ok(), (cfg.ok() ? "" : cfg.err().message));
    return std::move(cfg).value();
}

} // namespace

TEST_SUITE("config keys") {
    TEST_CASE("every row's key is documented in config/kpool.example.toml, in its section") {
        const auto documented = example_keys();
        for (const section_keys& s : all_keys()) {
            CAPTURE(s.section);
            REQUIRE(documented.count(s.section) == 1);
            for (const std::string_view k : s.keys) {
                CAPTURE(k);
                // A key that is a table ("limits") is documented by its own [SECTION.KEY].
                CHECK((documented.at(s.section).count(std::string(k)) == 1 ||
                       documented.count(s.section + "." + std::string(k)) == 1));
            }
        }
    }

    TEST_CASE("the example file's keys are all rows (it parses, so none is unknown)") {
        std::ifstream in(std::string(KPOOL_SOURCE_DIR) + "/config/kpool.example.toml");
        std::ostringstream text;
        text << in.rdbuf();
        // As written it names /run/kpool; what matters here is that every key is known.
        auto cfg = parse_config(text.str(), "kpool.example.toml");
        CHECK_MESSAGE(cfg.ok(), (cfg.ok() ? "" : cfg.err().message));
    }

    TEST_CASE("a reload's effect follows from the rows") {
        const config base = config_of("[pools.a]\n");
        const auto with = [](const std::string& pool_lines) {
            return config_of("[pools.a]\n" + pool_lines).pools[0];
        };
        const pool_config& a = base.pools[0];
        const auto effect_of = [&](const pool_config& next) -> std::string {
            for (const auto effect : {reload_effect::replace_kernels, reload_effect::rebuild_zygote,
                                      reload_effect::reconfigure}) {
                if (const auto key = changed_pool_key(a, next, effect)) {
                    return std::string(*key) + ":" + std::to_string(static_cast<int>(effect));
                }
            }
            return "none";
        };
        const auto replace = std::to_string(static_cast<int>(reload_effect::replace_kernels));
        const auto rebuild = std::to_string(static_cast<int>(reload_effect::rebuild_zygote));
        const auto reconfigure = std::to_string(static_cast<int>(reload_effect::reconfigure));
        CHECK(effect_of(a) == "none");
        CHECK(effect_of(with("kernelspec = \"ir\"\n")) == "kernelspec:" + replace);
        CHECK(effect_of(with("python = \"/opt/py\"\n")) == "python:" + replace);
        CHECK(effect_of(with("[pools.a.limits]\nmemory_mb = 512\n")) == "limits:" + replace);
        // A pool made a sandbox on reload must not keep handing out unsandboxed warm kernels.
        CHECK(effect_of(with("isolation = \"sandbox\"\n")) == "isolation:" + replace);
        CHECK(effect_of(with("isolation = \"sandbox\"\n[pools.a.sandbox]\nnetwork = false\n"))
                  .starts_with("transport:" + replace));
        CHECK(effect_of(with("prefault = \"off\"\n")) == "prefault:" + rebuild);
        CHECK(effect_of(with("preload = [\"json\"]\n")) == "preload:" + rebuild);
        CHECK(effect_of(with("size = 5\n")) == "size:" + reconfigure);
        CHECK(effect_of(with("lease_s = 5\n")) == "lease_s:" + reconfigure);
        CHECK(effect_of(with("context_snippet = \"x({context})\"\n")) ==
              "context_snippet:" + reconfigure);

        const daemon_config& d = base.daemon;
        CHECK_FALSE(changed_daemon_key(d, d, reload_effect::restart));
        CHECK(changed_daemon_key(
                  d, config_of("[daemon]\nmetrics = \"127.0.0.1:9\"\n[pools.a]\n").daemon,
                  reload_effect::restart) == "metrics");
        CHECK_FALSE(changed_daemon_key(
            d, config_of("[daemon]\nmax_kernels = 9\n[pools.a]\n").daemon, reload_effect::restart));
    }

    TEST_CASE("[serve]: every key is a kpool serve flag too, set through the key's own row") {
        std::set<std::string> flagged;
        for (const serve_flag_group& group : serve_flags()) {
            for (const serve_flag& f : group.flags) {
                CHECK(f.flag.starts_with("--"));
                CHECK(!f.help.empty());
                flagged.insert(std::string(f.key));
            }
        }
        for (const section_keys& s : all_keys()) {
            if (s.section != "serve") {
                continue;
            }
            for (const std::string_view k : s.keys) {
                CAPTURE(k);
                // require_token's flag is --no-token, which kpool serve reads itself.
                CHECK((flagged.count(std::string(k)) == 1 || k == "require_token"));
            }
        }
        serve_config c;
        CHECK(set_serve_key(c, "max_queue", std::int64_t{5}).ok());
        CHECK(c.max_queue == 5);
        CHECK(set_serve_key(c, "queue_timeout_s", 0.5).ok());
        CHECK(c.queue_timeout == std::chrono::milliseconds(500));
        CHECK(set_serve_key(c, "cull_busy", true).ok());
        CHECK(c.gateway.cull_busy);
        CHECK(set_serve_key(c, "env_whitelist", std::vector<std::string>{"LANG"}).ok());
        CHECK(c.gateway.env_whitelist == std::vector<std::string>{"LANG"});
        CHECK(set_serve_key(c, "max_age", std::string("600")).ok());
        CHECK(c.cors.max_age == "600");
        CHECK(set_serve_key(c, "listen", std::string("127.0.0.1:0")).ok());
        CHECK(c.port == 0);
        CHECK(set_serve_key(c, "spares", std::int64_t{65}).err().message ==
              "'spares' must be from 0 to 64, not 65");
        CHECK(set_serve_key(c, "root", std::string("rel")).err().message ==
              "'root' must be an absolute path");
        CHECK(set_serve_key(c, "kernel_lease_s", 1.0).err().code == kpool::errc::bad_request);
    }

    TEST_CASE("enum names: one table each, both ways") {
        CHECK(std::string(to_string(launcher_kind::fork)) == "fork");
        CHECK(named<launcher_kind>("auto") == launcher_kind::automatic);
        CHECK_FALSE(named<launcher_kind>("clone"));
        CHECK(std::string(to_string(isolation_kind::sandbox)) == "sandbox");
        CHECK(named<isolation_kind>("none") == isolation_kind::none);
        // The zygote checks the prefault mode it is given against its own copy of the names.
        std::ifstream zygote(std::string(KPOOL_SOURCE_DIR) + "/daemon/process/zygote.py");
        std::ostringstream text;
        text << zygote.rdbuf();
        std::smatch m;
        const std::string source = text.str();
        REQUIRE(std::regex_search(source, m, std::regex(R"(PREFAULT_MODES = \(([^)]*)\))")));
        std::string expected;
        for (const std::string_view name : enum_names<prefault_mode>::names) {
            expected += (expected.empty() ? "\"" : ", \"") + std::string(name) + "\"";
        }
        CHECK(m[1].str() == expected);
    }
}
