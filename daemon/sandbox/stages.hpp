// The three processes of a sandboxed kernel, and who runs each:
//
//   outer (the pid kpoold knows)  unshares the namespaces, forks the other two, waits for the
//   |                             kernel, then ends the sandbox and exits as the kernel did
//   +- init (pid 1 inside)        builds the root filesystem, tells the kernel it may go on
//   |                             (with the seccomp program), then only reaps orphans; when it
//   |                             dies, the kernel of Linux kills everything left inside
//   +- kernel (pid 2 inside)      waits for init, enters its working directory, gives up its
//                                 privileges, installs the filter, runs the kernel
//
// A spawned kernel's three are this helper (`kpool-sandbox spawn SPEC -- ARGV`); a forked
// kernel's are the zygote's child, init spawned from it as this helper (`init`), and the
// kernel forked from it (daemon/process/zygote_sandbox.py, which is outer and kernel in Python).
// Both init and the kernel die with the outer process (a parent-death signal, checked against a
// pipe only the outer process holds open, so that a death before the signal was armed counts).
#pragma once

#include "protocol/sandbox_spec.hpp"

#include <string>
#include <vector>

namespace kpool::sandbox {

// init: never returns. `go_fd` gives one byte once the kernel's process exists (a fork that
// runs while init pivots the shared mount namespace may keep the host's root: the kernel of Linux
// moves only the processes it sees at that moment); `ready_fd` then gets "ok N\n" and N bytes
// of seccomp program, or "error TEXT\n"; `life_fd` is the read end of the outer process's pipe.
[[noreturn]] void run_init(const protocol::sandbox_spec& spec, int go_fd, int ready_fd,
                           int life_fd);

// outer, once init and the kernel exist: never returns (zygote_sandbox.py's wait_as_outer is the
// same for forked kernels).
[[noreturn]] void run_outer(int kernel_pid, int init_pid);

// A whole spawned kernel: never returns (exits 125 when the sandbox cannot be made).
[[noreturn]] void run_spawn(const protocol::sandbox_spec& spec,
                            const std::vector<std::string>& argv);

} // namespace kpool::sandbox
