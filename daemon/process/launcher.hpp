// How a kernel process comes to exist. The daemon asks a launcher for a process and learns of its
// output and exit through callbacks; spawn_launcher vforks+execs from a helper thread. Other
// launchers (a fork server that clones a pre-imported parent) implement the same interface.
#pragma once

#include "protocol/result.hpp"
#include "protocol/sandbox_spec.hpp"

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kpool::daemon {

// One setrlimit applied in the child before exec (soft and hard limit alike).
struct resource_limit {
    int resource; // RLIMIT_AS, RLIMIT_CPU, RLIMIT_NOFILE, ...
    std::uint64_t value;
};

struct launch_spec {
    std::vector<std::string> argv;
    std::vector<std::string> env; // complete environment, "NAME=value"
    std::string cwd;              // empty: the daemon's
    std::vector<resource_limit> limits;
    std::string connection_file; // what {connection_file} in argv became (for the zygote)
    bool idle = false; // start at SCHED_IDLE: background work (daemon/process/cpu_priority.hpp)
    // isolation = "sandbox": the kernel starts in this sandbox, made by the kpool-sandbox helper
    // at `sandbox_helper` (daemon/sandbox/stages.hpp), whichever launcher starts it.
    std::optional<protocol::sandbox_spec> sandbox;
    std::string sandbox_helper;
};

struct exit_status {
    std::int64_t code = 0;
    int term_signal = 0;
    std::string
        reason; // what the kernel of Linux said, when known: "out of memory (limit 512 MiB)"
    std::string describe() const; // "exit code 1" / "killed by signal 9 (Killed)" / the reason
};

// A launched process. Launching may finish after launch() returns: pid() is 0 until on_started.
// Destroying it while the process runs kills the process group; its exit is still reaped, so
// nothing becomes a zombie.
class launched_process {
public:
    virtual ~launched_process() = default;
    virtual int pid() const = 0;
    // Sends signum to the process group (the kernel leads one of its own). 0 or -errno.
    // Before the process exists, the signal is kept and sent as soon as it does.
    virtual int signal_group(int signum) = 0;
    // Someone now waits for this process: a launch still in progress at SCHED_IDLE (a fork the
    // zygote makes for a refill) goes on at normal priority. Nothing to do by default.
    virtual void hurry() {}
    // Whether the kernel answers a kpool_context_request on its control channel (a client's cwd
    // and env applied without running a cell): kernels forked pre-built by kpool's zygote do.
    virtual bool applies_context_message() const { return false; }
};

// What a launcher keeps about one process for its handle (the launched_process it returns), in
// memory that may outlive the handle: the pid once known, a signal asked for before that,
// whether it exited, whether the handle is gone. Both launchers' handles are thin wrappers over
// it, so pending signals and kill-on-drop behave alike.
struct process_record {
    int pid = 0;
    int pending_signal = 0;
    bool exited = false;
    bool owner_gone = false;

    // Sends signum to the process group, or keeps it until the pid is known. 0 or -errno.
    int signal_group(int signum);
    // The pid is now known: delivers a signal asked for meanwhile (SIGKILL if nobody wants the
    // process any more).
    void started(int new_pid);
    // The handle is dropped: a live process is killed; its exit is still reaped and reported to
    // nobody.
    void drop();
};

struct launch_callbacks {
    std::function<void(int pid)> on_started;         // the process exists
    std::function<void(std::string_view)> on_output; // stdout and stderr bytes
    std::function<void(exit_status)> on_exit;        // called once, also when it never started
};

class launcher {
public:
    virtual ~launcher() = default;
    virtual result<std::unique_ptr<launched_process>> launch(const launch_spec& spec,
                                                             launch_callbacks callbacks) = 0;
};

} // namespace kpool::daemon
