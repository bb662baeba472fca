// A cgroup per sandboxed kernel, for [pools.NAME.limits] memory_mb and processes: the kernel
// and everything it starts count together, and an out-of-memory kill is seen as one.
//
// kpoold makes them where it can write: cgroup v2 at /sys/fs/cgroup (root), or v1's memory and
// pids hierarchies (root on a hybrid host, as Debian 12 boots with
// systemd.unified_cgroup_hierarchy=0). Elsewhere (an ordinary user without delegation) the limits
// fall back to what holds without cgroups, per kernel process rather than per tree: RLIMIT_AS for
// memory, RLIMIT_NPROC inside the kernel's own user namespace for processes; status says which
// (how()).
#pragma once

#include "protocol/result.hpp"

#include <memory>
#include <string>
#include <vector>

namespace kpool::daemon {

// One kernel's groups; removed (rmdir) when dropped, after its processes are gone.
class kernel_cgroup {
public:
    kernel_cgroup(std::vector<std::string> dirs, int memory_mb, bool v2);
    ~kernel_cgroup();
    kernel_cgroup(const kernel_cgroup&) = delete;
    kernel_cgroup& operator=(const kernel_cgroup&) = delete;

    // The cgroup.procs files the sandbox's first process joins.
    std::vector<std::string> procs() const;
    // Whether the kernel of Linux killed a process of this group for want of memory.
    bool oom_killed() const;
    int memory_mb() const { return m_memory_mb; }

private:
    std::vector<std::string> m_dirs;
    int m_memory_mb;
    bool m_v2;
};

class kernel_cgroups {
public:
    // `run`: this daemon run's id, the name of the parent group of its kernels' groups. Only
    // looks at what kpoold may write; the parent groups are made for the first kernel's.
    explicit kernel_cgroups(std::string run);
    ~kernel_cgroups(); // removes the parent groups (empty by then)
    kernel_cgroups(const kernel_cgroups&) = delete;
    kernel_cgroups& operator=(const kernel_cgroups&) = delete;

    // "cgroup v2", "cgroup v1 (memory, pids)", or "" where kpoold can make none.
    const std::string& how() const { return m_how; }
    // The groups for one kernel with these limits (0: none of that kind).
    result<std::unique_ptr<kernel_cgroup>> create(const std::string& kernel, int memory_mb,
                                                  int processes);

private:
    // Makes the parent groups (v2: with the memory and pids controllers for their children).
    status make_parents();

    std::string m_how;
    bool m_v2 = false;
    std::vector<std::string> m_parents; // v2: one; v1: memory's, then pids'
    bool m_made = false;
};

} // namespace kpool::daemon
