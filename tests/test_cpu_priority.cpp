// cpu_priority: every thread of a process to SCHED_IDLE and back, on a real child process.
#include "daemon/process/cpu_priority.hpp"

#include <doctest/doctest.h>

#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <thread>
#include <vector>

using namespace kpool::daemon;

namespace {

std::vector<int> threads_of(int pid) {
    std::vector<int> tids;
    for (const auto& e :
         std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/task")) {
        tids.push_back(std::stoi(e.path().filename().string()));
    }
    return tids;
}

} // namespace

TEST_SUITE("cpu priority") {
    TEST_CASE("every thread of a process moves to SCHED_IDLE and back") {
        const auto support = cpu_priority::prepare();
        if (!support.available) {
            MESSAGE("skipped: " << support.why_not); // the daemon then keeps normal priority
            return;
        }
        int ready[2];
        REQUIRE(::pipe(ready) == 0);
        const pid_t child = ::fork();
        if (child == 0) {
            // Three threads besides the main one, then wait to be looked at.
            std::vector<std::thread> threads;
            for (int i = 0; i < 3; ++i) {
                threads.emplace_back([] { ::pause(); });
            }
            (void)!::write(ready[1], "x", 1);
            ::pause();
            ::_exit(0);
        }
        char c;
        REQUIRE(::read(ready[0], &c, 1) == 1);
        const auto tids = threads_of(child);
        REQUIRE(tids.size() == 4);
        CHECK(cpu_priority::make_idle(child) == 0);
        for (int tid : tids) {
            CHECK(cpu_priority::policy_of(tid) == SCHED_IDLE);
        }
        CHECK(cpu_priority::make_normal(child) == 0);
        for (int tid : tids) {
            CHECK(cpu_priority::policy_of(tid) == SCHED_OTHER);
        }
        ::kill(child, SIGKILL);
        ::waitpid(child, nullptr, 0);
        ::close(ready[0]);
        ::close(ready[1]);
        CHECK(cpu_priority::make_normal(child) == -ESRCH);
    }
}
