// What a sandboxed pool's kernels see and are (isolation = "sandbox"): decided once per pool
// configuration (sandbox_plan), completed per kernel (its connection file, its cgroups), and
// carried to the launchers in launch_spec. The sandbox itself is made by the kpool-sandbox helper
// (daemon/sandbox/), for spawned and forked kernels alike.
#pragma once

#include "config/config.hpp"
#include "daemon/process/launcher.hpp"
#include "jupyter/kernelspec.hpp"
#include "protocol/sandbox_spec.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kpool::daemon {

// Read-only for every sandboxed kernel: the system (Debian's /lib, /bin and /sbin are links
// into /usr, copied as links).
inline const std::vector<std::string> system_readable = {"/usr",    "/lib", "/lib32", "/lib64",
                                                         "/libx32", "/bin", "/sbin",  "/etc"};
// Empty and private to each kernel (HOME is added: the kernel's own).
inline const std::vector<std::string> private_scratch = {"/tmp", "/var/tmp", "/dev/shm"};

struct sandbox_plan {
    protocol::sandbox_spec base; // every kernel's, before its own parts
    std::string helper;          // the kpool-sandbox program
    // Why this host cannot sandbox the pool's kernels (empty: it can). Such a pool starts no
    // kernel (never one without its sandbox); status and the log say why.
    std::string problem;

    // Status: namespaces, who kernels run as, network, filesystem, and how `limits` hold
    // (`cgroups`: kernel_cgroups::how(), empty where kpoold can make none).
    nlohmann::json describe(const config::kernel_limits& limits, const std::string& cgroups) const;
};

// Whether an acquire's cwd lies within a sandboxed pool's roots (the path normalised first).
bool within_roots(const std::string& cwd, const std::vector<std::string>& roots);

// Why a cwd within the roots cannot be a kernel's working directory (empty: it can): missing, not
// a directory, or a symbolic link on the way below its root. Checked before a kernel is taken,
// so that such a request costs the pool nothing; `kpool-sandbox workdir` checks again as it binds.
std::string workdir_problem(const std::string& cwd, const std::vector<std::string>& roots);

// `hidden`: kpool's own directories and key files, never visible inside.
sandbox_plan plan_sandbox(const config::pool_config& pc, const jupyter::resolved_kernelspec& spec,
                          const std::vector<std::string>& hidden);

// What holds of `limits` for a kernel without a cgroup of its own (per process, not per tree;
// sandbox_plan::describe says the same): RLIMIT_AS for memory, RLIMIT_NPROC in the kernel's own
// user namespace for processes (as root, with no user namespace, none).
void limits_without_cgroup(const config::kernel_limits& limits, protocol::sandbox_spec& spec,
                           std::vector<resource_limit>& rlimits);

// A sandboxed kernel's ipc sockets go in a directory of its own (the only one of the socket
// directory its sandbox sees), which the kernel's user may write when kpoold is root: made
// beside `prefix`, its new prefix returned; removed with remove_private_ipc_dir(that prefix).
result<std::string> make_private_ipc_dir(const std::string& prefix,
                                         const protocol::sandbox_spec& spec);
void remove_private_ipc_dir(const std::string& private_prefix);

// Where kpool-sandbox is: beside the running program (a build tree), else in ../lib/kpool
// (an installed one). Empty if neither exists.
std::string find_sandbox_helper();

} // namespace kpool::daemon
