// spawn_launcher with real processes on a real libuv loop: start, output, exit codes, signals
// sent before the process exists, and a loop that closes with nothing left open.
#include "daemon/process/spawn_launcher.hpp"
#include "jupyter/executable.hpp"

#include <doctest/doctest.h>

#include <sys/resource.h>

#include <csignal>
#include <functional>
#include <optional>
#include <sstream>

using namespace kpool::daemon;
using kpool::jupyter::resolve_executable;

namespace {

struct outcome {
    int pid = 0;
    std::string output;
    std::optional<exit_status> exit;
};

// Runs one process to its end on a fresh loop; `before_run` may act on the handle first.
outcome run(const launch_spec& spec,
            const std::function<void(launched_process&)>& before_run = {}) {
    uv_loop_t loop;
    uv_loop_init(&loop);
    outcome out;
    {
        spawn_launcher launcher(&loop);
        auto proc = launcher.launch(spec, {[&](int pid) { out.pid = pid; },
                                           [&](std::string_view s) { out.output += s; },
                                           [&](exit_status st) { out.exit = st; }});
        REQUIRE(proc.ok());
        if (before_run) {
            before_run(**proc);
        }
        uv_run(&loop, UV_RUN_DEFAULT);
    }
    uv_run(&loop, UV_RUN_DEFAULT); // the launcher's own handle closes
    CHECK(uv_loop_close(&loop) == 0);
    return out;
}

outcome run(const std::vector<std::string>& argv,
            const std::function<void(launched_process&)>& before_run = {}) {
    return run(launch_spec{argv, {"PATH=/usr/bin:/bin"}, "", {}, "", false, {}, ""}, before_run);
}

} // namespace

TEST_SUITE("spawn_launcher") {
    TEST_CASE("output and exit code of a process found on PATH") {
        auto out = run({"sh", "-c", "echo out; echo err >&2; exit 3"});
        CHECK(out.pid > 0);
        CHECK(out.output.find("out\n") != std::string::npos);
        CHECK(out.output.find("err\n") != std::string::npos);
        REQUIRE(out.exit.has_value());
        CHECK(out.exit->code == 3);
        CHECK(out.exit->term_signal == 0);
        CHECK(out.exit->describe() == "exit code 3");
    }

    TEST_CASE("the child runs in a process group of its own, in our session") {
        // Our session, not a new one: with autogroup scheduling a session is a scheduling group
        // of its own, and SCHED_IDLE starts would then compete as equals (cpu_priority.hpp).
        auto out = run({"sh", "-c", "ps -o sid= -o pgid= -p $$; trap - PIPE; exit 0"});
        REQUIRE(out.exit.has_value());
        CHECK(out.exit->code == 0);
        std::istringstream ids(out.output);
        int sid = 0;
        int pgid = 0;
        ids >> sid >> pgid;
        CHECK(sid == ::getsid(0));
        CHECK(pgid == out.pid);
    }

    TEST_CASE("an idle launch starts at SCHED_IDLE, threads included; a normal one does not") {
        const char* code = "import os, threading; t = threading.Thread(target=lambda: "
                           "print(os.sched_getscheduler(0))); "
                           "print(os.sched_getscheduler(0)); t.start(); t.join()";
        auto idle = run(launch_spec{
            {"/usr/bin/python3", "-c", code}, {"PATH=/usr/bin:/bin"}, "", {}, "", true, {}, ""});
        REQUIRE(idle.exit.has_value());
        CHECK(idle.output == "5\n5\n"); // SCHED_IDLE
        auto normal = run({"/usr/bin/python3", "-c", code});
        REQUIRE(normal.exit.has_value());
        CHECK(normal.output == "0\n0\n"); // SCHED_OTHER
    }

    TEST_CASE("a signal sent before the process exists is delivered when it does") {
        auto out = run({"sleep", "30"}, [](launched_process& p) {
            CHECK(p.pid() == 0); // still being spawned
            CHECK(p.signal_group(SIGTERM) == 0);
        });
        REQUIRE(out.exit.has_value());
        CHECK(out.exit->term_signal == SIGTERM);
        CHECK(out.exit->describe().rfind("killed by signal 15", 0) == 0);
    }

    TEST_CASE("resource limits are applied in the child, soft and hard alike") {
        auto out = run(launch_spec{{"sh", "-c", "ulimit -Sn; ulimit -Hn; ulimit -St"},
                                   {"PATH=/usr/bin:/bin"},
                                   "",
                                   {{RLIMIT_NOFILE, 77}, {RLIMIT_CPU, 50}},
                                   "",
                                   false,
                                   {},
                                   ""});
        REQUIRE(out.exit.has_value());
        CHECK(out.exit->code == 0);
        CHECK(out.output == "77\n77\n50\n");
    }

    TEST_CASE("the child is killed when the daemon dies (parent-death signal is SIGKILL)") {
        // PR_GET_PDEATHSIG = 2 stores the signal in an int.
        auto out = run({"/usr/bin/python3", "-c",
                        "import ctypes; s = ctypes.c_int(); "
                        "ctypes.CDLL(None).prctl(2, ctypes.byref(s)); print(s.value)"});
        REQUIRE(out.exit.has_value());
        CHECK(out.exit->code == 0);
        CHECK(out.output == std::to_string(SIGKILL) + "\n");
    }

    TEST_CASE("a missing executable is an error at once; PATH is searched like execvp") {
        CHECK(resolve_executable("/nonexistent/x", "").err().message ==
              "cannot start /nonexistent/x: no such file or directory");
        CHECK(resolve_executable("no-such-program-kpool", "/usr/bin:/bin").err().message ==
              "cannot start no-such-program-kpool: not found on PATH");
        CHECK(resolve_executable("sh", "/nonexistent:/bin").value() == "/bin/sh");
    }

    TEST_CASE("a working directory that does not exist fails the spawn, reported as an exit") {
        uv_loop_t loop;
        uv_loop_init(&loop);
        std::optional<exit_status> exit;
        std::string output;
        {
            spawn_launcher launcher(&loop);
            auto proc =
                launcher.launch({{"/bin/true"}, {}, "/nonexistent/dir", {}, "", false, {}, ""},
                                {nullptr, [&](std::string_view s) { output += s; },
                                 [&](exit_status st) { exit = st; }});
            REQUIRE(proc.ok());
            uv_run(&loop, UV_RUN_DEFAULT);
        }
        uv_run(&loop, UV_RUN_DEFAULT);
        CHECK(uv_loop_close(&loop) == 0);
        REQUIRE(exit.has_value());
        CHECK(exit->code == 127);
        CHECK(output == "kpoold: cannot start /bin/true: no such file or directory\n");
    }
}
