// identity: the sandbox's namespaces and the privileges its processes give up (identity.hpp).
#include "daemon/sandbox/identity.hpp"

#include "daemon/sandbox/sys_status.hpp"

#include <fcntl.h>
#include <grp.h>
#include <linux/capability.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <string>

namespace kpool::sandbox {
namespace {

status write_file(const std::string& path, const std::string& text) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        return sys_error("open " + path);
    }
    const ssize_t n = ::write(fd, text.data(), text.size());
    const int err = errno;
    ::close(fd);
    if (n != static_cast<ssize_t>(text.size())) {
        return sys_error("write " + path, n < 0 ? err : EIO);
    }
    return ok_status();
}

} // namespace

status enter_namespaces(const protocol::sandbox_spec& spec) {
    // Before anything else starts: every process of the kernel is then counted in its cgroups.
    for (const std::string& procs : spec.cgroup_procs) {
        if (auto st = write_file(procs, "0\n"); !st) {
            return st;
        }
    }
    const uid_t uid = ::getuid();
    const gid_t gid = ::getgid();
    int flags = CLONE_NEWNS | CLONE_NEWPID | CLONE_NEWIPC;
    if (spec.user_namespace) {
        flags |= CLONE_NEWUSER;
    }
    if (!spec.network) {
        flags |= CLONE_NEWNET;
    }
    if (::unshare(flags) != 0) {
        return sys_error(spec.user_namespace ? "unshare (user namespaces may be off on this host: "
                                               "kernel.unprivileged_userns_clone, or a container's "
                                               "seccomp profile)"
                                             : "unshare");
    }
    if (spec.user_namespace) {
        // An unprivileged process may map only itself, and must give up setgroups first.
        const std::string one_uid = std::to_string(uid) + " " + std::to_string(uid) + " 1\n";
        const std::string one_gid = std::to_string(gid) + " " + std::to_string(gid) + " 1\n";
        if (auto st = write_file("/proc/self/setgroups", "deny\n"); !st) {
            return st;
        }
        if (auto st = write_file("/proc/self/uid_map", one_uid); !st) {
            return st;
        }
        if (auto st = write_file("/proc/self/gid_map", one_gid); !st) {
            return st;
        }
    }
    return ok_status();
}

status drop_privileges(const protocol::sandbox_spec& spec) {
    // The bounding set first: dropping from it needs CAP_SETPCAP, which goes last.
    for (int cap = 0; cap <= CAP_LAST_CAP; ++cap) {
        if (::prctl(PR_CAPBSET_DROP, static_cast<unsigned long>(cap), 0UL, 0UL, 0UL) != 0 &&
            errno != EINVAL) {
            return sys_error("dropping capability " + std::to_string(cap) +
                             " from the bounding set");
        }
    }
    if (::prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0UL, 0UL, 0UL) != 0 && errno != EINVAL) {
        return sys_error("clearing ambient capabilities");
    }
    if (!spec.user_namespace) {
        if (spec.uid == 0) {
            return error{errc::internal, "a sandboxed kernel never runs as root"};
        }
        if (::setgroups(0, nullptr) != 0 || ::setresgid(spec.gid, spec.gid, spec.gid) != 0 ||
            ::setresuid(spec.uid, spec.uid, spec.uid) != 0) {
            return sys_error("becoming uid " + std::to_string(spec.uid));
        }
    }
    __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
    __user_cap_data_struct none[2] = {};
    if (::syscall(SYS_capset, &header, none) != 0) {
        return sys_error("capset");
    }
    if (::prctl(PR_SET_NO_NEW_PRIVS, 1UL, 0UL, 0UL, 0UL) != 0) {
        return sys_error("no_new_privs");
    }
    // A change of uid made the process non-dumpable (its /proc/self root's): as it was.
    ::prctl(PR_SET_DUMPABLE, 1UL, 0UL, 0UL, 0UL);
    if (spec.processes > 0) {
        // Counted per uid and user namespace (Linux >= 5.14): the kernel's own processes.
        const rlimit limit{spec.processes, spec.processes};
        if (::setrlimit(RLIMIT_NPROC, &limit) != 0) {
            return sys_error("RLIMIT_NPROC");
        }
    }
    return ok_status();
}

} // namespace kpool::sandbox
