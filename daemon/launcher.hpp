// How a kernel process comes to exist. The daemon asks a launcher for a process and learns of its
// output and exit through callbacks; spawn_launcher vforks+execs from a helper thread. Other launchers (a
// fork server that clones a pre-imported parent) implement the same interface.
#pragma once

#include "protocol/result.hpp"

#include <cstdint>
#include <functional>
#include <memory>
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
};

struct exit_status {
    std::int64_t code = 0;
    int term_signal = 0;
    std::string describe() const; // "exit code 1" / "killed by signal 9 (Killed)"
};

// A launched process. Launching may finish after launch() returns: pid() is 0 until on_started.
// Destroying it while the process runs kills the process group; its exit is still reaped, so
// nothing becomes a zombie.
class launched_process {
public:
    virtual ~launched_process() = default;
    virtual int pid() const = 0;
    // Sends signum to the process group (the kernel runs in a session of its own). 0 or -errno.
    // Before the process exists, the signal is kept and sent as soon as it does.
    virtual int signal_group(int signum) = 0;
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
