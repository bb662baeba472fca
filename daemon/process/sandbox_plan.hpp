// What a sandboxed pool's kernels see and are (isolation = "sandbox"): decided once per pool
// configuration (sandbox_plan), completed per kernel (its connection file, its cgroups), and
// carried to the launchers in launch_spec. The sandbox itself is made by the kpool-sandbox helper
// (daemon/sandbox/), for spawned and forked kernels alike.
#pragma once

#include "config/config.hpp"
#include "jupyter/kernelspec.hpp"
#include "protocol/sandbox_spec.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kpool::daemon {

// Read-only for every sandboxed kernel: the system (Debian's /lib, /bin and /sbin are links
// into /usr, copied as links).
inline const std::vector<std::string> system_readable = {"/usr", "/lib", "/lib32", "/lib64", "/libx32",
                                                         "/bin", "/sbin", "/etc"};
// Empty and private to each kernel (HOME is added: the kernel's own).
inline const std::vector<std::string> private_scratch = {"/tmp", "/var/tmp", "/dev/shm"};

struct sandbox_plan {
    protocol::sandbox_spec base; // every kernel's, before its own parts
    std::string helper;          // the kpool-sandbox program
    std::vector<std::string> roots;
    // Why this host cannot sandbox the pool's kernels (empty: it can). Such a pool starts no
    // kernel (never one without its sandbox); status and the log say why.
    std::string problem;

    // Status: namespaces, who kernels run as, network, filesystem.
    nlohmann::json describe() const;
};

// Whether an acquire's cwd lies within a sandboxed pool's roots (the path normalised first).
bool within_roots(const std::string& cwd, const std::vector<std::string>& roots);

// `hidden`: kpool's own directories and key files, never visible inside.
sandbox_plan plan_sandbox(const config::pool_config& pc, const jupyter::resolved_kernelspec& spec,
                          const std::vector<std::string>& hidden);

// Where kpool-sandbox is: beside the running program (a build tree), else in ../lib/kpool
// (an installed one). Empty if neither exists.
std::string find_sandbox_helper();

} // namespace kpool::daemon
