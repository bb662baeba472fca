// Starting kernels are background work: they run at SCHED_IDLE until they are warm, so a refill
// takes only CPU that leased kernels and kpoold's own loop leave unused, and get SCHED_OTHER
// back (nice unchanged, 0) before they are handed out. Kernels being shut down go back to
// SCHED_IDLE: their teardown is background work too.
//
// Scheduling policy is per thread on Linux, so every thread of the process is moved. Leaving
// SCHED_IDLE needs CAP_SYS_NICE or an RLIMIT_NICE of at least 20 in the target (sched(7)); an
// unprivileged kpoold raises its own soft limit to 20 when its hard limit allows (the systemd
// unit sets LimitNICE=20) and kernels inherit it. Where that is impossible starting kernels stay
// at normal priority and status says why: a kernel that could not be given its priority back
// would run its users' code at idle priority.
//
// SCHED_IDLE only ranks threads within one scheduling group. With autogroup (the default on
// desktop and many server kernels, when the cpu cgroup is the root) every session is a group,
// so kernels are started in kpoold's session (spawn_launcher.cpp, zygote.py).
#pragma once

#include <string>

namespace kpool::daemon::cpu_priority {

struct support {
    bool available = false;
    std::string why_not; // when not available
};

// Raises the soft RLIMIT_NICE as far as 20 (within the hard limit), then checks on a scratch
// thread that a thread can enter SCHED_IDLE and leave it again. Once, at start.
support prepare();

// Every thread of process `pid` (and, for `tree`, of its descendants: a kernel's, whose sandbox
// makes it the grandchild of the pid kpoold knows) to SCHED_IDLE / back to SCHED_OTHER. 0, or
// -errno of the first failure (-ESRCH: the process is gone).
enum class reach { process, tree };
int make_idle(int pid, reach scope = reach::process);
int make_normal(int pid, reach scope = reach::process);

// How long (ns) the main threads of the processes `scope` reaches have waited, runnable, for a
// CPU so far (schedstat's run_delay): a stopping kernel whose count grows fast is starved by a
// busy host, not hung (it would sleep) nor busy on an idle one (it would run).
unsigned long long cpu_wait_ns(int pid, reach scope = reach::process);

// The policy of thread `tid` (SCHED_OTHER, SCHED_IDLE, ...), or -errno. For tests and status.
int policy_of(int tid);

} // namespace kpool::daemon::cpu_priority
