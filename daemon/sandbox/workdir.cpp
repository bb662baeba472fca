// workdir: an acquire's cwd bound into a warm sandboxed kernel's mount namespace (workdir.hpp).
#include "daemon/sandbox/workdir.hpp"

#include "daemon/sandbox/sys_status.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <sstream>
#include <string>

namespace kpool::sandbox {
namespace {

// A file descriptor closed when it goes.
class fd_guard {
public:
    explicit fd_guard(int fd = -1) : m_fd(fd) {}
    ~fd_guard() {
        if (m_fd >= 0) {
            ::close(m_fd);
        }
    }
    fd_guard(const fd_guard&) = delete;
    fd_guard& operator=(const fd_guard&) = delete;
    int get() const { return m_fd; }
    bool ok() const { return m_fd >= 0; }

private:
    int m_fd;
};

// A directory below `at`, as an O_PATH descriptor; no symbolic link, no escape upwards.
int open_beneath(int at, const std::string& path) {
    open_how how{};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve =
        RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS | (at == AT_FDCWD ? 0 : RESOLVE_BENEATH);
    return static_cast<int>(::syscall(SYS_openat2, at, path.c_str(), &how, sizeof how));
}

int fail(int code, const std::string& why) {
    std::fprintf(stderr, "kpool-sandbox workdir: %s\n", why.c_str());
    return code;
}

status join(int pid, const char* ns, int type) {
    const std::string path = "/proc/" + std::to_string(pid) + "/ns/" + ns;
    const fd_guard fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd.ok()) {
        return sys_error("open " + path);
    }
    return check(::setns(fd.get(), type), std::string("joining the kernel's ") + ns + " namespace");
}

// A fresh tmpfs holding `rel`'s directories, read-only once made, over `root_at`; the innermost
// directory's descriptor, for the working directory to go on.
int directories_over(int root_at, const std::string& rel, std::string& why) {
    const fd_guard context(::fsopen("tmpfs", FSOPEN_CLOEXEC));
    if (!context.ok() || ::fsconfig(context.get(), FSCONFIG_SET_STRING, "mode", "0755", 0) != 0 ||
        ::fsconfig(context.get(), FSCONFIG_CMD_CREATE, nullptr, nullptr, 0) != 0) {
        why = sys_error("a tmpfs for the way to the working directory").message;
        return -1;
    }
    const fd_guard mnt(::fsmount(context.get(), FSMOUNT_CLOEXEC,
                                 MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC));
    if (!mnt.ok()) {
        why = sys_error("fsmount").message;
        return -1;
    }
    int at = ::dup(mnt.get());
    std::istringstream parts(rel);
    std::string part;
    while (std::getline(parts, part, '/')) {
        if (::mkdirat(at, part.c_str(), 0755) != 0 && errno != EEXIST) {
            why = sys_error("mkdir " + part).message;
            ::close(at);
            return -1;
        }
        const int next = ::openat(at, part.c_str(), O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        ::close(at);
        if (next < 0) {
            why = sys_error("open " + part).message;
            return -1;
        }
        at = next;
    }
    mount_attr read_only{};
    read_only.attr_set = MOUNT_ATTR_RDONLY;
    if (::mount_setattr(mnt.get(), "", AT_EMPTY_PATH, &read_only, sizeof read_only) != 0 ||
        ::move_mount(mnt.get(), "", root_at, "",
                     MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
        why = sys_error("mounting the way to the working directory").message;
        ::close(at);
        return -1;
    }
    return at; // now a directory of the attached mount
}

} // namespace

int run_workdir(int outer_pid, const protocol::sandbox_spec& spec, const std::string& cwd) {
    const std::string normal = std::filesystem::path(cwd).lexically_normal().string();
    std::size_t index = spec.roots.size();
    for (std::size_t i = 0; i < spec.roots.size() && index == spec.roots.size(); ++i) {
        const std::string& root = spec.roots[i];
        if (!root.empty() &&
            (normal == root || normal.starts_with(root == "/" ? root : root + "/"))) {
            index = i;
        }
    }
    if (normal.empty() || normal.front() != '/' || index == spec.roots.size()) {
        return fail(protocol::unusable_workdir_exit,
                    "'" + cwd + "' is not within the sandbox's roots");
    }
    const std::string& root = spec.roots[index];
    std::string rel = normal.substr(root.size());
    while (rel.starts_with('/')) {
        rel.erase(0, 1);
    }
    while (rel.ends_with('/')) {
        rel.pop_back();
    }

    // The user namespace first: it gives the capabilities that joining its mount namespace needs.
    if (spec.user_namespace) {
        if (auto st = join(outer_pid, "user", CLONE_NEWUSER); !st) {
            return fail(sandbox_failed, st.err().message);
        }
    }
    if (auto st = join(outer_pid, "mnt", CLONE_NEWNS); !st) {
        return fail(sandbox_failed, st.err().message);
    }
    // Inside now, at the sandbox's root.
    const std::string staged = std::string(protocol::staging_dir) + "/" + std::to_string(index);
    const fd_guard staging(open_beneath(AT_FDCWD, staged));
    if (!staging.ok()) {
        return fail(protocol::unusable_workdir_exit,
                    sys_error("root " + root + " (does it exist on the host?)").message);
    }
    const fd_guard source(rel.empty() ? ::dup(staging.get()) : open_beneath(staging.get(), rel));
    if (!source.ok()) {
        const int err = errno;
        return fail(protocol::unusable_workdir_exit,
                    "'" + cwd + "': " +
                        (err == ELOOP ? std::string("a symbolic link on the way (not followed)")
                                      : std::string(std::strerror(err))));
    }
    const fd_guard tree(::open_tree(
        source.get(), "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE));
    if (!tree.ok()) {
        return fail(sandbox_failed, sys_error("open_tree " + cwd).message);
    }
    const fd_guard root_at(open_beneath(AT_FDCWD, root));
    if (!root_at.ok()) {
        return fail(sandbox_failed, sys_error("the sandbox's " + root).message);
    }
    std::string why;
    const fd_guard target(rel.empty() ? ::dup(root_at.get())
                                      : directories_over(root_at.get(), rel, why));
    if (!target.ok()) {
        return fail(sandbox_failed, why.empty() ? sys_error("dup").message : why);
    }
    if (::move_mount(tree.get(), "", target.get(), "",
                     MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) != 0) {
        return fail(sandbox_failed, sys_error("binding " + cwd).message);
    }
    return 0;
}

} // namespace kpool::sandbox
