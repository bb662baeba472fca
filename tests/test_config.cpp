// Config: defaults, every key, and one exact file:line:col diagnostic per kind of mistake.
#include "config/config.hpp"
#include "config/paths.hpp"

#include <doctest/doctest.h>

#include <unistd.h>

#include <cstdlib>

using namespace kpool::config;

namespace {
std::string diagnostic_of(const std::string& text) {
    auto cfg = parse_config(text, "t.toml");
    REQUIRE_FALSE(cfg.ok());
    return cfg.err().message;
}
config parsed(const std::string& text) {
    auto cfg = parse_config(text, "t.toml");
    REQUIRE(cfg.ok());
    return *cfg;
}
} // namespace

TEST_SUITE("config") {
    TEST_CASE("the embedded default: one python3 pool of 2, paths for this user") {
        ::setenv("XDG_RUNTIME_DIR", "/tmp", 1);
        config cfg = default_config();
        CHECK(cfg.daemon.runtime_dir == "/tmp/kpool");
        CHECK(cfg.daemon.control == "ipc:///tmp/kpool/control");
        CHECK(cfg.daemon.max_kernels == 64);
        CHECK(cfg.daemon.log_level == "info");
        REQUIRE(cfg.pools.size() == 1);
        CHECK(cfg.pools[0].name == "python3");
        CHECK(cfg.pools[0].kernelspec == "python3");
        CHECK(cfg.pools[0].size == 2);
        ::setenv("XDG_RUNTIME_DIR", "/nonexistent/xdg", 1); // set, but not there: ignored
        CHECK(default_runtime_dir() == (::geteuid() == 0
                                            ? std::string("/run/kpool")
                                            : "/tmp/kpool-" + std::to_string(::geteuid())));
        ::unsetenv("XDG_RUNTIME_DIR");
    }

    TEST_CASE("every key is read") {
        auto cfg = parse_config(R"(
[daemon]
control = "ipc:///tmp/k/c"
runtime_dir = "/tmp/k"
log_level = "debug"
max_kernels = 10

[pools.py]
kernelspec = "python3"
size = 3
max_starting = 1
ready_timeout_s = 12.5
lease_s = 0
shutdown_grace_s = 1
transport = "ipc"
ip = "::1"
heartbeat_s = 0
heartbeat_timeout_s = 2

[pools.py.limits]
address_space_mb = 4096
cpu_seconds = 600
open_files = 256

[pools.other]
)",
                                "t.toml");
        REQUIRE(cfg.ok());
        CHECK(cfg->daemon.control == "ipc:///tmp/k/c");
        CHECK(cfg->daemon.runtime_dir == "/tmp/k");
        CHECK(cfg->daemon.log_level == "debug");
        CHECK(cfg->daemon.max_kernels == 10);
        const pool_config* py = cfg->find_pool("py");
        REQUIRE(py != nullptr);
        CHECK(py->kernelspec == "python3");
        CHECK(py->size == 3);
        CHECK(py->max_starting == 1);
        CHECK(py->ready_timeout_s == doctest::Approx(12.5));
        CHECK(py->lease_s == 0);
        CHECK(py->shutdown_grace_s == 1);
        CHECK(py->transport == "ipc");
        CHECK(py->ip == "::1");
        CHECK(py->heartbeat_s == 0);
        CHECK(py->heartbeat_timeout_s == 2);
        CHECK(py->limits.address_space_mb == 4096);
        CHECK(py->limits.cpu_seconds == 600);
        CHECK(py->limits.open_files == 256);
        const pool_config* other = cfg->find_pool("other");
        REQUIRE(other != nullptr);
        CHECK(other->kernelspec == "other"); // defaults to the pool's name
        CHECK(other->size == 2);
        CHECK(other->transport == "tcp");
        CHECK(other->ip == "127.0.0.1");
        CHECK(other->heartbeat_s == 10);
        CHECK(other->heartbeat_timeout_s == 5);
        CHECK(other->limits.open_files == 0);
        CHECK(cfg->daemon.runtime_dir == "/tmp/k");
    }

    TEST_CASE("[serve]'s gateway keys") {
        const config c = parsed(
            "[pools.a]\n[serve]\ncull_idle_timeout_s = 600\ncull_interval_s = 30\n"
            "cull_connected = true\nkernel_lease_s = 60\nenv_whitelist = [\"LANG\", \"TZ\"]\n"
            "max_kernels = 8\nallow_origin = \"*\"\n");
        CHECK(c.serve.gateway.cull_idle_timeout == std::chrono::seconds(600));
        CHECK(c.serve.gateway.cull_interval == std::chrono::seconds(30));
        CHECK(c.serve.gateway.cull_connected);
        CHECK(!c.serve.gateway.cull_busy);
        CHECK(c.serve.gateway.kernel_lease == std::chrono::seconds(60));
        CHECK(c.serve.gateway.env_whitelist == std::vector<std::string>{"LANG", "TZ"});
        CHECK(c.serve.gateway.max_kernels == 8);
        CHECK(c.serve.allow_origins == std::vector<std::string>{"*"});
        CHECK(parsed("[pools.a]\n").serve.gateway.cull_idle_timeout.count() ==
              0); // never, by default
    }

    TEST_CASE("[serve]'s front door: a token by default, allowed hosts and origins") {
        const config none = parsed("[pools.a]\n");
        CHECK(!none.serve.no_token);
        CHECK(none.serve.allow_hosts.empty());
        CHECK(none.serve.allow_origins.empty());
        const config c =
            parsed("[pools.a]\n[serve]\nrequire_token = false\nallow_hosts = [\"devbox.test\"]\n"
                   "allow_origin = \"https://a.example, https://b.example\"\n");
        CHECK(c.serve.no_token);
        CHECK(c.serve.allow_hosts == std::vector<std::string>{"devbox.test"});
        CHECK(c.serve.allow_origins ==
              std::vector<std::string>{"https://a.example", "https://b.example"});
        CHECK(diagnostic_of("[pools.a]\n[serve]\nrequire_token = \"no\"\n") ==
              "t.toml:3:17: 'require_token' must be true or false, not a string");
        CHECK(diagnostic_of("[pools.a]\n[serve]\nallow_hosts = \"x\"\n") ==
              "t.toml:3:15: 'allow_hosts' must be an array of strings, not a string");
    }

    TEST_CASE("refill_delay_s: unset by default, for every pool in [daemon], a pool's own") {
        const config none = parsed("[pools.a]\n");
        CHECK(!none.daemon.refill_delay_s);
        CHECK(!none.pools[0].refill_delay_s);
        const config both =
            parsed("[daemon]\nrefill_delay_s = 0\n[pools.a]\nrefill_delay_s = 2.5\n");
        CHECK(both.daemon.refill_delay_s == 0.0);
        CHECK(both.pools[0].refill_delay_s == 2.5);
    }

    TEST_CASE("kernel_ports: auto by default, ephemeral, or a range") {
        CHECK(parsed("[pools.a]\n").daemon.kernel_ports == kernel_port_source::automatic);
        CHECK(parsed("[daemon]\nkernel_ports = \"ephemeral\"\n[pools.a]\n").daemon.kernel_ports ==
              kernel_port_source::ephemeral);
        const config cfg = parsed("[daemon]\nkernel_ports = \"20000-20999\"\n[pools.a]\n");
        CHECK(cfg.daemon.kernel_ports == kernel_port_source::range);
        CHECK(cfg.daemon.kernel_ports_first == 20000);
        CHECK(cfg.daemon.kernel_ports_last == 20999);
    }

    TEST_CASE("[serve]'s limits") {
        const config c =
            parsed("[pools.a]\n[serve]\nmax_body = 2048\nmax_header = 4096\nmax_connections = 10\n"
                   "resolve_every_s = 5\n");
        CHECK(c.serve.resolve_every == std::chrono::seconds(5));
        CHECK(c.serve.max_body == 2048);
        CHECK(c.serve.max_header == 4096);
        CHECK(c.serve.max_connections == 10);
        const config d = parsed("[pools.a]\n");
        CHECK(d.serve.max_header == 65536);
        CHECK(d.serve.max_connections == 1024);
        CHECK(d.serve.resolve_every == std::chrono::seconds(30));
    }

    TEST_CASE("access control keys: uids/gids for ipc, CURVE for tcp") {
        auto ipc = parse_config("[daemon]\nallowed_uids = [1000, 0]\nallowed_gids = [27]\n"
                                "[pools.a]\n",
                                "t.toml");
        REQUIRE(ipc.ok());
        CHECK(ipc->daemon.allowed_uids == std::vector<unsigned>{1000, 0});
        CHECK(ipc->daemon.allowed_gids == std::vector<unsigned>{27});
        CHECK(ipc->daemon.restricts_ipc_peers());
        auto metrics = parse_config("[daemon]\nmetrics = \"[::1]:9464\"\n[pools.a]\n", "t.toml");
        REQUIRE(metrics.ok());
        CHECK(metrics->daemon.metrics == "[::1]:9464");
        auto tcp = parse_config(
            "[daemon]\ncontrol = \"tcp://0.0.0.0:5555\"\ncurve_secret_key_file = \"/etc/k\"\n"
            "curve_allowed_keys = [\"rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7\"]\n[pools.a]\n",
            "t.toml");
        REQUIRE(tcp.ok());
        CHECK(tcp->daemon.is_tcp());
        CHECK(tcp->daemon.curve_secret_key_file == "/etc/k");
        CHECK(tcp->daemon.curve_allowed_keys.size() == 1);
    }

    TEST_CASE("size = auto with min and max; launcher; startup_code") {
        auto cfg =
            parse_config("[pools.a]\nsize = \"auto\"\nmin = 1\nmax = 6\nlauncher = \"fork\"\n"
                         "startup_code = \"import json\"\n",
                         "t.toml");
        REQUIRE(cfg.ok());
        const pool_config& a = cfg->pools[0];
        CHECK(a.auto_size);
        CHECK(a.min_size == 1);
        CHECK(a.max_size == 6);
        CHECK(a.size == 1); // starts at min
        CHECK(a.launcher == launcher_kind::fork);
        CHECK(a.startup_code == "import json");
    }

    TEST_CASE("launcher defaults to auto and prime to true; both can be set") {
        auto cfg = parse_config("[pools.a]\n[pools.b]\nlauncher = \"auto\"\nprime = false\n"
                                "[pools.c]\nlauncher = \"spawn\"\n",
                                "t.toml");
        REQUIRE(cfg.ok());
        CHECK(cfg->pools[0].launcher == launcher_kind::automatic);
        CHECK(cfg->pools[0].prime);
        CHECK(cfg->pools[1].launcher == launcher_kind::automatic);
        CHECK_FALSE(cfg->pools[1].prime);
        CHECK(cfg->pools[2].launcher == launcher_kind::spawn);
        CHECK(std::string(to_string(launcher_kind::automatic)) == "auto");
    }

    TEST_CASE(
        "preload: learn by default, off, or a list of modules; its cap; the state directory") {
        const config cfg = parsed(
            "[daemon]\nstate_dir = \"/srv/kpool-state\"\n[pools.a]\n[pools.b]\npreload = \"off\"\n"
            "[pools.c]\npreload = [\"pandas\", \"matplotlib.pyplot\"]\npreload_max_mb = 256\n");
        CHECK(cfg.daemon.state_dir == "/srv/kpool-state");
        CHECK(cfg.pools[0].preload == preload_mode::learn);
        CHECK(cfg.pools[0].preload_max_mb == 1024);
        CHECK(cfg.pools[1].preload == preload_mode::off);
        CHECK(cfg.pools[2].preload == preload_mode::list);
        CHECK(cfg.pools[2].preload_modules ==
              std::vector<std::string>{"pandas", "matplotlib.pyplot"});
        CHECK(cfg.pools[2].preload_max_mb == 256);
        CHECK(std::string(to_string(preload_mode::list)) == "list");
        CHECK(parsed("[pools.a]\n").daemon.state_dir.starts_with("/"));
    }

    TEST_CASE("prefault: learn by default, start or off") {
        const config cfg =
            parsed("[pools.a]\n[pools.b]\nprefault = \"start\"\n[pools.c]\nprefault = \"off\"\n");
        CHECK(cfg.pools[0].prefault == prefault_mode::learn);
        CHECK(cfg.pools[1].prefault == prefault_mode::start);
        CHECK(cfg.pools[2].prefault == prefault_mode::off);
        CHECK(std::string(to_string(prefault_mode::start)) == "start");
        CHECK_FALSE(named<prefault_mode>("Learn"));
        CHECK(named<prefault_mode>("off") == prefault_mode::off);
    }

    TEST_CASE("control defaults to the runtime directory's socket") {
        auto cfg = parse_config("[daemon]\nruntime_dir = \"/srv/k\"\n[pools.a]\n", "t.toml");
        REQUIRE(cfg.ok());
        CHECK(cfg->daemon.control == "ipc:///srv/k/control");
    }

    TEST_CASE("diagnostics point at the offending key or value") {
        const std::vector<std::pair<std::string, std::string>> table = {
            {"[pools.a]\nsize = ", "t.toml:2:8: "},
            {"[daemon]\ncolour = 1\n[pools.a]\n", "t.toml:2:1: unknown key 'colour' in [daemon]"},
            {"[pools.a]\n  sise = 2\n", "t.toml:2:3: unknown key 'sise' in [pools.a]"},
            {"extra = 1\n[pools.a]\n", "t.toml:1:1: unknown key 'extra' in the top level"},
            {"[pools.a]\nsize = \"two\"\n", "t.toml:2:8: 'size' must be an integer or \"auto\""},
            {"[pools.a]\nsize = -1\n", "t.toml:2:8: 'size' must be from 0 to 64, not -1"},
            {"[daemon]\nmax_kernels = 0\n[pools.a]\n",
             "t.toml:2:15: 'max_kernels' must be from 1 to 4096, not 0"},
            {"[daemon]\nmax_kernels = 3\n[pools.a]\nsize = 2\n[pools.b]\nsize = 2\n",
             "t.toml:6:8: pool sizes add up to 4, more than [daemon] max_kernels = 3"},
            {"[pools.a]\nready_timeout_s = 0\n",
             "t.toml:2:19: 'ready_timeout_s' must be above 0 and at most 3600 seconds"},
            {"[pools.a]\nlease_s = true\n",
             "t.toml:2:11: 'lease_s' must be a number of seconds, not a boolean"},
            {"[pools.a]\ntransport = \"udp\"\n",
             "t.toml:2:13: 'transport' must be \"tcp\" or \"ipc\""},
            {"[pools.a]\nip = \"localhost\"\n",
             "t.toml:2:6: 'ip' must be an IPv4 or IPv6 address, not 'localhost'"},
            {"[daemon]\nlog_level = \"loud\"\n[pools.a]\n",
             "t.toml:2:13: 'log_level' must be one of trace, debug, info, warn, error, critical, "
             "off"},
            {"[daemon]\ncontrol = \"tcp://127.0.0.1:5555\"\n[pools.a]\n",
             "t.toml:2:11: a tcp:// control endpoint needs CURVE: set 'curve_secret_key_file' and "
             "'curve_allowed_keys' (anyone who reaches the port could take kernels otherwise)"},
            {"[daemon]\ncontrol = \"udp://x\"\n[pools.a]\n",
             "t.toml:2:11: 'control' must be an ipc:// or tcp:// endpoint"},
            {"[daemon]\nallowed_uids = [1, -2]\n[pools.a]\n",
             "t.toml:2:20: 'allowed_uids' holds numeric ids from 0 to 4294967294"},
            {"[daemon]\nallowed_gids = \"staff\"\n[pools.a]\n",
             "t.toml:2:16: 'allowed_gids' must be an array of integers, not a string"},
            {"[daemon]\ncontrol = \"tcp://127.0.0.1:5555\"\ncurve_secret_key_file = \"/k\"\n"
             "curve_allowed_keys = [\"short\"]\n[pools.a]\n",
             "t.toml:4:23: 'curve_allowed_keys' holds CURVE public keys: 40 characters of Z85 text "
             "(`kpool keygen` makes them)"},
            {"[daemon]\ncurve_allowed_keys = []\n[pools.a]\n",
             "t.toml:2:22: 'curve_allowed_keys' applies to tcp:// endpoints only"},
            {"[daemon]\ncontrol = \"tcp://127.0.0.1:5555\"\ncurve_secret_key_file = \"/k\"\n"
             "curve_allowed_keys = [\"0000000000000000000000000000000000000000\"]\n"
             "allowed_uids = [1]\n[pools.a]\n",
             "t.toml:5:16: 'allowed_uids' applies to ipc:// endpoints only; tcp clients are "
             "authenticated by 'curve_allowed_keys'"},
            {"[daemon]\nbackground_limit_s = -1\n[pools.a]\n",
             "t.toml:2:22: 'background_limit_s' must be at least 0 and at most 3600 seconds"},
            {"[daemon]\nkernel_ports = \"high\"\n[pools.a]\n",
             "t.toml:2:16: 'kernel_ports' must be \"auto\", \"ephemeral\" or a range such as "
             "\"61000-65535\", not 'high'"},
            {"[daemon]\nkernel_ports = \"61000-\"\n[pools.a]\n",
             "t.toml:2:16: 'kernel_ports' must be \"auto\", \"ephemeral\" or a range such as "
             "\"61000-65535\", not '61000-'"},
            {"[daemon]\nkernel_ports = \"-5-10\"\n[pools.a]\n",
             "t.toml:2:16: 'kernel_ports' must be \"auto\", \"ephemeral\" or a range such as "
             "\"61000-65535\", not '-5-10'"},
            {"[daemon]\nkernel_ports = \"60000-70000\"\n[pools.a]\n",
             "t.toml:2:16: 'kernel_ports' must lie within 1024-65535 and hold at least 5 ports "
             "(one kernel's), not '60000-70000'"},
            {"[daemon]\nkernel_ports = \"500-2000\"\n[pools.a]\n",
             "t.toml:2:16: 'kernel_ports' must lie within 1024-65535 and hold at least 5 ports "
             "(one kernel's), not '500-2000'"},
            {"[daemon]\nkernel_ports = \"5000-5003\"\n[pools.a]\n",
             "t.toml:2:16: 'kernel_ports' must lie within 1024-65535 and hold at least 5 ports "
             "(one kernel's), not '5000-5003'"},
            {"[daemon]\nkernel_ports = 61000\n[pools.a]\n",
             "t.toml:2:16: 'kernel_ports' must be a string, not an integer"},
            {"[daemon]\nrefill_delay_s = 11\n[pools.a]\n",
             "t.toml:2:18: 'refill_delay_s' must be at least 0 and at most 10 seconds"},
            {"[pools.a]\nrefill_delay_s = -1\n",
             "t.toml:2:18: 'refill_delay_s' must be at least 0 and at most 10 seconds"},
            {"[pools.a]\nrefill_delay_s = \"1s\"\n",
             "t.toml:2:18: 'refill_delay_s' must be a number of seconds, not a string"},
            {"[pools.a]\n[serve]\nlisten = \"localhost:80\"\n",
             "t.toml:3:10: 'listen' must be HOST:PORT with an IP address, e.g. \"127.0.0.1:8890\""},
            {"[pools.a]\n[serve]\nroot = \"notebooks\"\n",
             "t.toml:3:8: 'root' must be an absolute path"},
            {"[pools.a]\n[serve]\ncert_file = \"/c.pem\"\n",
             "t.toml:3:13: TLS needs both 'cert_file' and 'key_file'"},
            {"[pools.a]\n[serve]\nmax_queue = 0\n",
             "t.toml:3:13: 'max_queue' must be from 1 to 100000, not 0"},
            {"[pools.a]\n[serve]\nspares = 65\n",
             "t.toml:3:10: 'spares' must be from 0 to 64, not 65"},
            {"[pools.a]\n[serve]\ncells_ahead = 0\n",
             "t.toml:3:15: 'cells_ahead' must be from 1 to 64, not 0"},
            {"[pools.a]\n[serve]\nmax_connections = 0\n",
             "t.toml:3:19: 'max_connections' must be from 1 to 1000000, not 0"},
            {"[pools.a]\n[serve]\nport = 1\n", "t.toml:3:1: unknown key 'port' in [serve]"},
            {"[pools.a]\n[serve]\nenv_whitelist = \"PATH\"\n",
             "t.toml:3:17: 'env_whitelist' must be an array of strings, not a string"},
            {"[pools.a]\n[serve]\nenv_whitelist = [\"PATH\", \"\"]\n",
             "t.toml:3:26: 'env_whitelist' must be an array of non-empty strings"},
            {"[pools.a]\n[serve]\nkernel_lease_s = 1\n",
             "t.toml:3:18: 'kernel_lease_s' must be at least 3 and at most 86400 seconds"},
            {"[pools.a]\nheartbeat_timeout_s = 0\n",
             "t.toml:2:23: 'heartbeat_timeout_s' must be above 0 and at most 3600 seconds"},
            {"[pools.a.limits]\nopen_files = 3\n",
             "t.toml:2:14: 'open_files' must be from 16 to 1048576, not 3"},
            {"[pools.a.limits]\nstack = 3\n",
             "t.toml:2:1: unknown key 'stack' in [pools.a.limits]"},
            {"[pools.a]\nsize = \"big\"\n", "t.toml:2:8: 'size' must be an integer or \"auto\""},
            {"[pools.a]\nsize = \"auto\"\n",
             "t.toml:2:8: size = \"auto\" needs 'max', the most warm kernels to keep"},
            {"[pools.a]\nsize = \"auto\"\nmin = 3\nmax = 2\n",
             "t.toml:4:7: 'max' must be at least 'min'"},
            {"[pools.a]\nsize = 2\nmax = 4\n", "t.toml:3:7: 'max' applies to size = \"auto\" only"},
            {"[pools.a]\nlauncher = \"clone\"\n",
             "t.toml:2:12: 'launcher' must be \"auto\", \"spawn\" or \"fork\""},
            {"[pools.a]\nprime = \"yes\"\n",
             "t.toml:2:9: 'prime' must be true or false, not a string"},
            {"[pools.a]\npreload = \"always\"\n",
             "t.toml:2:11: 'preload' must be \"learn\", \"off\" or a list of module names"},
            {"[pools.a]\nprefault = \"all\"\n",
             "t.toml:2:12: 'prefault' must be \"learn\", \"start\" or \"off\""},
            {"[pools.a]\nprefault = 1\n", "t.toml:2:12: "},
            {"[pools.a]\npreload = [\"pandas\", \"../x\"]\n",
             "t.toml:2:22: 'preload' lists module names (\"pandas\", \"matplotlib.pyplot\"), not "
             "\"../x\""},
            {"[pools.a]\npreload = [\"a..b\"]\n",
             "t.toml:2:12: 'preload' lists module names (\"pandas\", \"matplotlib.pyplot\"), not "
             "\"a..b\""},
            {"[pools.a]\npreload_max_mb = 1\n",
             "t.toml:2:18: 'preload_max_mb' must be from 16 to 1048576, not 1"},
            {"[daemon]\nstate_dir = \"var\"\n[pools.a]\n",
             "t.toml:2:13: 'state_dir' must be an absolute path"},
            {"[daemon]\nmetrics = \"localhost:9464\"\n[pools.a]\n",
             "t.toml:2:11: 'metrics' must be HOST:PORT, e.g. \"127.0.0.1:9464\""},
            {"[daemon]\nmetrics = \"127.0.0.1:99999\"\n[pools.a]\n",
             "t.toml:2:11: 'metrics' must be HOST:PORT, e.g. \"127.0.0.1:9464\""},
            {"[daemon]\nruntime_dir = \"relative\"\n[pools.a]\n",
             "t.toml:2:15: 'runtime_dir' must be an absolute path"},
            {"[daemon]\n", "t.toml:1:1: no pools configured: add a [pools.NAME] table"},
            {"pools = 3\n", "t.toml:1:9: 'pools' must be a table, not an integer"},
            {"[pools]\na = 3\n", "t.toml:2:5: 'pools.a' must be a table, not an integer"},
            {"[pools.\"a b\"]\n",
             "t.toml:1:8: pool name 'a b' may hold only letters, digits, '-', '_', '.'"},
            {"[pools.a]\ncontext_snippet = \"os.chdir(x)\"\n",
             "t.toml:2:19: 'context_snippet' must contain {context}, where the cwd and env go"},
            {"[pools.a]\nkernelspec = \"../x\"\n", "t.toml:2:14: 'kernelspec' must be a kernelspec "
                                                   "name (letters, digits, '-', '_', '.')"},
        };
        for (const auto& [text, message] : table) {
            CAPTURE(text);
            const std::string diag = diagnostic_of(text);
            if (message.back() == ' ') { // syntax errors: position exact, wording toml++'s own
                CHECK(diag.rfind(message, 0) == 0);
            } else {
                CHECK(diag == message);
            }
        }
    }

    TEST_CASE("an unreadable file is a diagnostic too") {
        auto cfg = load_config_file("/nonexistent/kpool.toml");
        REQUIRE_FALSE(cfg.ok());
        CHECK(cfg.err().message == "/nonexistent/kpool.toml:1:1: cannot read the file");
    }
}
