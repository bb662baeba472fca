// cpu_priority: SCHED_IDLE for starting and stopping kernels, SCHED_OTHER for warm ones.
#include "daemon/process/cpu_priority.hpp"

#include <sched.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace kpool::daemon::cpu_priority {
namespace {

// RLIMIT_NICE of 20 lets a process return to nice 0 (ceiling 20 - limit) and so leave SCHED_IDLE.
constexpr rlim_t nice_limit_for_normal = 20;

// Every thread of `pid`, and for reach::tree of its descendants (/proc/PID/task/TID/children):
// a sandboxed kernel is the grandchild of the process kpoold knows (daemon/sandbox/stages.hpp),
// and what a kernel started goes with it. `processes`, if given, gets the processes walked.
std::vector<int> threads_of(int pid, reach scope, std::vector<int>* processes_out = nullptr) {
    std::vector<int> threads;
    std::vector<int> processes = {pid};
    for (std::size_t next = 0; next < processes.size() && next < 4096; ++next) {
        std::error_code ec;
        const std::string base = "/proc/" + std::to_string(processes[next]) + "/task";
        for (const auto& entry : std::filesystem::directory_iterator(base, ec)) {
            const int tid = std::atoi(entry.path().filename().c_str());
            if (tid <= 0) {
                continue;
            }
            threads.push_back(tid);
            if (scope == reach::process) {
                continue;
            }
            std::ifstream children(entry.path() / "children");
            for (int child = 0; children >> child;) {
                processes.push_back(child);
            }
        }
    }
    if (processes_out != nullptr) {
        *processes_out = std::move(processes);
    }
    return threads;
}

// Applies `policy` to every thread `scope` reaches. A thread started while we walk
// inherits the policy its creator had when it called clone(), which may be the old one: so the
// walk repeats until a whole pass finds every thread already at `policy`.
int set_policy(int pid, int policy, reach scope) {
    const sched_param none{};
    bool any = false;
    for (int round = 0; round < 8; ++round) {
        const std::vector<int> threads = threads_of(pid, scope);
        bool changed = false;
        for (const int tid : threads) {
            any = true;
            if (::sched_getscheduler(tid) == policy) {
                continue;
            }
            changed = true;
            if (::sched_setscheduler(tid, policy, &none) != 0 && errno != ESRCH) {
                return -errno; // a thread that exited meanwhile is no failure
            }
        }
        if (threads.empty() || !changed) {
            break;
        }
    }
    return any ? 0 : -ESRCH;
}

} // namespace

support prepare() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NICE, &limit) == 0 && limit.rlim_cur < nice_limit_for_normal) {
        const rlim_t wanted = limit.rlim_max == RLIM_INFINITY
                                  ? nice_limit_for_normal
                                  : std::min(limit.rlim_max, nice_limit_for_normal);
        if (wanted > limit.rlim_cur) {
            limit.rlim_cur = wanted;
            ::setrlimit(RLIMIT_NICE, &limit);
        }
    }
    // A thread of our own, so kpoold's loop never leaves normal priority, even for a moment.
    int result = 0;
    std::thread probe([&result] {
        const sched_param none{};
        if (::sched_setscheduler(0, SCHED_IDLE, &none) != 0) {
            result = errno;
        } else if (::sched_setscheduler(0, SCHED_OTHER, &none) != 0) {
            result = errno;
        }
    });
    probe.join();
    if (result == 0) {
        return {true, ""};
    }
    ::getrlimit(RLIMIT_NICE, &limit);
    return {false, "a thread cannot leave SCHED_IDLE (" + std::string(std::strerror(result)) +
                       "): kpoold lacks CAP_SYS_NICE and its RLIMIT_NICE is " +
                       std::to_string(limit.rlim_cur) + " (hard " + std::to_string(limit.rlim_max) +
                       "), 20 is needed; set LimitNICE=20 in the service"};
}

unsigned long long cpu_wait_ns(int pid, reach scope) {
    std::vector<int> processes;
    threads_of(pid, scope, &processes);
    unsigned long long waited = 0;
    // Each process's main thread: it runs the atexit functions and finalisation, and lives to
    // the end, while threads that exit take their counts with them (a sum over all would fall).
    for (const int process : processes) {
        // "time on a CPU, time waiting on a run queue, timeslices" (ns; sched-stats.rst).
        std::ifstream schedstat("/proc/" + std::to_string(process) + "/task/" +
                                std::to_string(process) + "/schedstat");
        unsigned long long ran = 0, delay = 0;
        if (schedstat >> ran >> delay) {
            waited += delay;
        }
    }
    return waited;
}

int make_idle(int pid, reach scope) { return set_policy(pid, SCHED_IDLE, scope); }

int make_normal(int pid, reach scope) { return set_policy(pid, SCHED_OTHER, scope); }

int policy_of(int tid) {
    const int policy = ::sched_getscheduler(tid);
    return policy < 0 ? -errno : policy;
}

} // namespace kpool::daemon::cpu_priority
