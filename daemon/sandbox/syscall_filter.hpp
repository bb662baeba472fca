// The seccomp filter every sandboxed kernel runs under (libseccomp builds it).
//
// Why a filter when the kernel already holds no capability and has no_new_privs: an unprivileged
// process may still create a user namespace of its own and hold every capability in it, which
// re-opens mount, namespace and BPF code paths of the host's kernel to a request's code (most
// recent Linux privilege escalations went through exactly those). The filter is a deny-list of
// what a notebook never needs: namespaces (unshare, setns, clone with CLONE_NEW*), mounting,
// ptrace and other processes' memory, kernel modules, kexec, BPF, perf, keyrings, userfaultfd,
// file handles, TIOCSTI. EPERM, so a library that probes gets an ordinary error; clone3 gets
// ENOSYS, so glibc falls back to clone, whose flags the filter can see. Other architectures'
// system calls (x32, i386 through int 0x80) kill the process: their numbers would bypass it.
#pragma once

#include "protocol/result.hpp"

#include <cstdint>
#include <vector>

namespace kpool::sandbox {

// The filter as a BPF program (struct sock_filter[]), for a process that installs it itself
// (a forked kernel, through prctl).
result<std::vector<std::uint8_t>> filter_program();

// Installs a program from filter_program() on the calling thread (no_new_privs first).
status install_filter(const std::vector<std::uint8_t>& program);

} // namespace kpool::sandbox
