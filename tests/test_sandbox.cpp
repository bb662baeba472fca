// Sandboxed pools (isolation = "sandbox"): their config keys and diagnostics, the sandbox spec
// both ways, the plan a pool's kernels get, the acquire's cwd rule, and the seccomp program.
// The sandbox itself is attacked for real in tests/integration/test_sandbox.py.
#include "config/config.hpp"
#include "daemon/process/sandbox_plan.hpp"
#include "daemon/sandbox/syscall_filter.hpp"
#include "protocol/sandbox_spec.hpp"

#include <doctest/doctest.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>

#include <algorithm>

using namespace kpool;

namespace {

config::config parsed(const std::string& text) {
    auto cfg = config::parse_config(text, "t.toml");
    REQUIRE_MESSAGE(cfg.ok(), (cfg.ok() ? "" : cfg.err().message));
    return *cfg;
}

std::string diagnostic_of(const std::string& text) {
    auto cfg = config::parse_config(text, "t.toml");
    REQUIRE_FALSE(cfg.ok());
    return cfg.err().message;
}

bool has(const std::vector<std::string>& list, const std::string& item) {
    return std::find(list.begin(), list.end(), item) != list.end();
}

} // namespace

TEST_SUITE("sandbox") {
    TEST_CASE("isolation is none by default; sandbox with its table and limits") {
        const auto cfg =
            parsed("[pools.a]\n"
                   "[pools.b]\nisolation = \"sandbox\"\n"
                   "[pools.b.sandbox]\nreadable = [\"/srv/data/\"]\nwritable = [\"/srv/out\"]\n"
                   "roots = [\"/srv/jobs\"]\nuser = \"kpool-kernel\"\n"
                   "[pools.b.limits]\nmemory_mb = 512\nprocesses = 64\n"
                   "[pools.c]\nisolation = \"sandbox\"\n[pools.c.sandbox]\nnetwork = false\n");
        CHECK(cfg.pools[0].isolation == config::isolation_kind::none);
        const auto& b = cfg.pools[1];
        CHECK(b.isolation == config::isolation_kind::sandbox);
        CHECK(b.sandbox.readable == std::vector<std::string>{"/srv/data"});
        CHECK(b.sandbox.writable == std::vector<std::string>{"/srv/out"});
        CHECK(b.sandbox.roots == std::vector<std::string>{"/srv/jobs"});
        CHECK(b.sandbox.user == "kpool-kernel");
        CHECK(b.sandbox.network);
        CHECK(b.limits.memory_mb == 512);
        CHECK(b.limits.processes == 64);
        // No network: the kernel's loopback is its own, so its channels go over ipc.
        CHECK_FALSE(cfg.pools[2].sandbox.network);
        CHECK(cfg.pools[2].transport == "ipc");
        CHECK(std::string(config::to_string(config::isolation_kind::sandbox)) == "sandbox");
    }

    TEST_CASE("diagnostics for the sandbox's keys") {
        CHECK(diagnostic_of("[pools.a]\nisolation = \"vm\"\n") ==
              "t.toml:2:13: 'isolation' must be \"none\" or \"sandbox\"");
        CHECK(diagnostic_of("[pools.a]\n[pools.a.sandbox]\nroots = [\"/x\"]\n")
                  .starts_with(
                      "t.toml:2:1: [pools.a.sandbox] applies to isolation = \"sandbox\" only"));
        CHECK(diagnostic_of(
                  "[pools.a]\nisolation = \"sandbox\"\n[pools.a.sandbox]\nroots = [\"jobs\"]\n") ==
              "t.toml:4:10: 'roots' must be an array of absolute paths");
        CHECK(diagnostic_of(
                  "[pools.a]\nisolation = \"sandbox\"\n[pools.a.sandbox]\nwritable = [\"\"]\n") ==
              "t.toml:4:13: 'writable' must be an array of absolute paths");
        // Normalised as read: what a path means, not how it is spelled.
        CHECK(parsed("[pools.a]\nisolation = \"sandbox\"\n[pools.a.sandbox]\nwritable = "
                     "[\"/a/../srv//x/\"]\n")
                  .pools[0]
                  .sandbox.writable == std::vector<std::string>{"/srv/x"});
        CHECK(diagnostic_of(
                  "[pools.a]\nisolation = \"sandbox\"\n[pools.a.sandbox]\nuser = \"root\"\n") ==
              "t.toml:4:8: 'user' names who sandboxed kernels run as when kpoold is root: never "
              "root");
        CHECK(diagnostic_of(
                  "[pools.a]\nisolation = \"sandbox\"\n[pools.a.sandbox]\nhome = \"/x\"\n") ==
              "t.toml:4:1: unknown key 'home' in [pools.a.sandbox]");
        CHECK(diagnostic_of("[pools.a]\nisolation = \"sandbox\"\ntransport = "
                            "\"tcp\"\n[pools.a.sandbox]\nnetwork = false\n") ==
              "t.toml:3:13: network = false needs transport = \"ipc\" (the kernel's loopback is "
              "its own)");
        CHECK(diagnostic_of("[pools.a]\n[pools.a.limits]\nmemory_mb = 8\n") ==
              "t.toml:3:13: 'memory_mb' must be from 32 to 1073741824, not 8");
    }

    TEST_CASE("the spec survives JSON both ways; a wrong type is named") {
        protocol::sandbox_spec s;
        s.user_namespace = false;
        s.uid = 65534;
        s.gid = 65534;
        s.network = false;
        s.readable = {"/usr", "/etc"};
        s.writable = {"/srv/jobs"};
        s.files = {"/run/k.json"};
        s.private_dirs = {"/tmp", "/root"};
        s.hidden = {"/etc/kpool"};
        s.cwd = "/root";
        s.cgroup_procs = {"/sys/fs/cgroup/memory/kpool-x/k/cgroup.procs"};
        s.processes = 65;
        const auto back = protocol::parse_sandbox_spec(protocol::format(s));
        REQUIRE(back.ok());
        CHECK(protocol::format(*back) == protocol::format(s));
        CHECK(back->uid == 65534);
        CHECK(back->files == s.files);
        const auto wrong = protocol::parse_sandbox_spec(R"({"uid": "nobody"})");
        REQUIRE_FALSE(wrong.ok());
        CHECK(wrong.err().message == "sandbox spec: 'uid' has the wrong type");
        CHECK_FALSE(protocol::parse_sandbox_spec("[1]").ok());
        CHECK_FALSE(protocol::parse_sandbox_spec("{").ok());
    }

    TEST_CASE("a pool's plan: the system read-only, roots kept for working directories, private "
              "scratch, kpool's own hidden") {
        const auto cfg = parsed(
            "[pools.a]\nisolation = \"sandbox\"\n[pools.a.sandbox]\nroots = [\"/srv/jobs\"]\n"
            "readable = [\"/srv/models\"]\n");
        jupyter::resolved_kernelspec spec;
        spec.spec.resource_dir = "/usr/share/jupyter/kernels/python3";
        spec.program = "/usr/bin/python3";
        const auto plan = daemon::plan_sandbox(cfg.pools[0], spec, {"/run/kpool", "/etc/kpool"});
        for (const char* path :
             {"/usr", "/etc", "/lib", "/srv/models", "/usr/share/jupyter/kernels/python3"}) {
            CHECK_MESSAGE(has(plan.base.readable, path), path);
        }
        CHECK(has(plan.base.roots, "/srv/jobs"));
        CHECK_FALSE(
            has(plan.base.writable, "/srv/jobs")); // only an acquire's cwd under it, at acquire
        for (const char* path : {"/tmp", "/var/tmp", "/dev/shm"}) {
            CHECK(has(plan.base.private_dirs, path));
        }
        CHECK(has(plan.base.hidden, "/run/kpool"));
        CHECK(plan.base.user_namespace == (::geteuid() != 0));
        if (::geteuid() == 0) {
            CHECK(plan.base.uid != 0); // nobody, never root
        }
        CHECK(plan.describe({}, "")["roots"] == nlohmann::json::array({"/srv/jobs"}));
        CHECK_FALSE(plan.describe({}, "").contains("limits"));
        config::kernel_limits limits;
        limits.memory_mb = 512;
        limits.processes = 64;
        const auto by_cgroup = plan.describe(limits, "cgroup v1 (memory, pids)")["limits"];
        CHECK(by_cgroup["memory_by"] ==
              "cgroup v1 (memory, pids), the kernel and what it starts together");
        CHECK(plan.describe(limits, "")["limits"]["memory_by"] ==
              "RLIMIT_AS, each process alone (kpoold can write no cgroup)");
        const auto no_user = parsed("[pools.a]\nisolation = \"sandbox\"\n[pools.a.sandbox]\nuser = "
                                    "\"no-such-user-here\"\n");
        if (::geteuid() == 0) {
            CHECK(daemon::plan_sandbox(no_user.pools[0], spec, {})
                      .problem.find("no-such-user-here") != std::string::npos);
        }
    }

    TEST_CASE("an acquire's cwd must lie within the roots") {
        const std::vector<std::string> roots = {"/srv/jobs", "/data"};
        CHECK(daemon::within_roots("/srv/jobs", roots));
        CHECK(daemon::within_roots("/srv/jobs/a/b", roots));
        CHECK(daemon::within_roots("/data/", roots));
        CHECK_FALSE(daemon::within_roots("/srv/jobs-other", roots));
        CHECK_FALSE(daemon::within_roots("/srv/jobs/../../etc", roots));
        CHECK_FALSE(daemon::within_roots("/srv", roots));
        CHECK_FALSE(daemon::within_roots("jobs", roots));
        CHECK_FALSE(daemon::within_roots("/srv/jobs", {}));
    }

    TEST_CASE("a cwd under the roots must be a directory there, with no link below its root") {
        std::string root = "/tmp/kpool-workdir-XXXXXX";
        REQUIRE(::mkdtemp(root.data()) != nullptr);
        REQUIRE(::mkdir((root + "/a").c_str(), 0755) == 0);
        REQUIRE(::symlink("/etc", (root + "/link").c_str()) == 0);
        REQUIRE(::close(::creat((root + "/file").c_str(), 0644)) == 0);
        const std::vector<std::string> roots = {root};
        CHECK(daemon::workdir_problem(root, roots).empty());
        CHECK(daemon::workdir_problem(root + "/a/", roots).empty());
        CHECK(daemon::workdir_problem(root + "/link", roots) ==
              "a symbolic link on the way (not followed)");
        CHECK(daemon::workdir_problem(root + "/link/ssl", roots) ==
              "a symbolic link on the way (not followed)");
        CHECK(daemon::workdir_problem(root + "/missing", roots) == "No such file or directory");
        CHECK(daemon::workdir_problem(root + "/file", roots) == "Not a directory");
        CHECK(daemon::workdir_problem("/etc", roots) == "not within the roots");
        for (const char* name : {"/a", "/link", "/file"}) {
            ::remove((root + name).c_str());
        }
        ::rmdir(root.c_str());
    }

    TEST_CASE("the seccomp program is whole BPF instructions") {
        const auto program = sandbox::filter_program();
        REQUIRE(program.ok());
        CHECK(program->size() % 8 == 0);
        CHECK(program->size() > 8 * 20); // a rule per refused call at least
    }
}
