// root_fs: the sandbox's filesystem, built in its own mount namespace (see root_fs.hpp).
#include "daemon/sandbox/root_fs.hpp"

#include "daemon/sandbox/sys_status.hpp"

#include <fcntl.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

namespace kpool::sandbox {
namespace {

// Where the host's root is while the new one is built, and where the new one grows.
constexpr const char* old_root = "/oldroot";
constexpr const char* new_root = "/newroot";

// What a path of the spec becomes. Ordered by strength: a path named twice takes the strongest.
enum class kind { readable, file, writable, private_dir, hidden };

// The device nodes a kernel (and what it starts) may use; bound from the host's /dev.
constexpr const char* devices[] = {"null", "zero", "full", "random", "urandom", "tty"};

status make_dirs(const std::string& path, mode_t mode = 0755) {
    std::string at;
    std::istringstream parts(path);
    std::string part;
    while (std::getline(parts, part, '/')) {
        if (part.empty()) {
            continue;
        }
        at += "/" + part;
        if (::mkdir(at.c_str(), mode) != 0 && errno != EEXIST) {
            return sys_error("mkdir " + at);
        }
    }
    return ok_status();
}

std::string parent_of(const std::string& path) {
    const auto slash = path.rfind('/');
    return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

// The host path with its parents' links resolved (the last component is kept as it is, so a
// link such as /lib is copied as a link), before the host's root moves.
std::string resolve_parents(const std::string& path) {
    char buf[PATH_MAX];
    const std::string parent = parent_of(path);
    const std::string name = path.substr(path.rfind('/') + 1);
    if (::realpath(parent.c_str(), buf) == nullptr) {
        return path; // skipped later if it does not exist
    }
    const std::string real(buf);
    return (real == "/" ? "" : real) + "/" + name;
}

// The flags a remount must keep: those the source mount has (a mount inherited from a more
// privileged namespace is locked, and a remount that drops its nosuid, nodev, noexec or
// read-only is refused).
unsigned long kept_flags(const std::string& path) {
    struct statvfs st {};
    if (::statvfs(path.c_str(), &st) != 0) {
        return 0;
    }
    unsigned long flags = 0;
    const std::pair<unsigned long, unsigned long> table[] = {
        {ST_RDONLY, MS_RDONLY},     {ST_NOSUID, MS_NOSUID},   {ST_NODEV, MS_NODEV},
        {ST_NOEXEC, MS_NOEXEC},     {ST_NOATIME, MS_NOATIME}, {ST_NODIRATIME, MS_NODIRATIME},
        {ST_RELATIME, MS_RELATIME},
    };
    for (const auto& [st_flag, ms_flag] : table) {
        if ((st.f_flag & st_flag) != 0) {
            flags |= ms_flag;
        }
    }
    return flags;
}

// Mount points at or below `top`, from /proc/self/mountinfo (field 5, octal escapes undone).
std::vector<std::string> mounts_below(const std::string& top) {
    std::ifstream info(std::string(old_root) + "/proc/self/mountinfo");
    std::vector<std::string> found;
    std::string line;
    while (std::getline(info, line)) {
        std::istringstream fields(line);
        std::string field;
        for (int i = 0; i < 5 && fields >> field; ++i) {
        }
        std::string point;
        for (std::size_t i = 0; i < field.size(); ++i) {
            if (field[i] == '\\' && i + 3 < field.size()) {
                point += static_cast<char>(std::stoi(field.substr(i + 1, 3), nullptr, 8));
                i += 3;
            } else {
                point += field[i];
            }
        }
        if (point == top || point.starts_with(top + "/")) {
            found.push_back(point);
        }
    }
    return found;
}

status remount(const std::string& point, bool read_only) {
    const unsigned long read_only_flag = read_only ? MS_RDONLY : 0;
    const unsigned long flags =
        MS_REMOUNT | MS_BIND | MS_NOSUID | MS_NODEV | kept_flags(point) | read_only_flag;
    return check(::mount(nullptr, point.c_str(), nullptr, flags, nullptr), "remount " + point);
}

// A host path at `inside` (its own path by default): a directory or a file bound (recursively),
// a link copied.
status bind(const std::string& path, bool read_only, const std::string& inside = {}) {
    const std::string from = old_root + path;
    const std::string to = new_root + (inside.empty() ? path : inside);
    struct stat st {};
    if (::lstat(from.c_str(), &st) != 0) {
        return ok_status(); // an allowed path this host does not have
    }
    if (auto made = make_dirs(parent_of(to)); !made) {
        return made;
    }
    if (S_ISLNK(st.st_mode)) {
        char target[PATH_MAX];
        const ssize_t n = ::readlink(from.c_str(), target, sizeof target - 1);
        if (n < 0) {
            return sys_error("readlink " + path);
        }
        target[n] = '\0';
        return check(::symlink(target, to.c_str()) == 0 || errno == EEXIST ? 0 : -1,
                     "symlink " + path);
    }
    if (S_ISDIR(st.st_mode)) {
        if (::mkdir(to.c_str(), 0755) != 0 && errno != EEXIST) {
            return sys_error("mkdir " + to);
        }
    } else {
        const int fd = ::open(to.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0) {
            return sys_error("create " + to);
        }
        ::close(fd);
    }
    if (::mount(from.c_str(), to.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0) {
        return sys_error("bind " + path);
    }
    // Every mount beneath it too: a recursive bind keeps each submount's own flags.
    for (const std::string& point : mounts_below(to)) {
        if (auto st2 = remount(point, read_only); !st2) {
            return st2;
        }
    }
    return ok_status();
}

status mount_tmpfs(const std::string& path, const protocol::sandbox_spec& spec, bool read_only) {
    if (auto made = make_dirs(path); !made) {
        return made;
    }
    std::string options = read_only ? "mode=0555" : "mode=0700";
    if (!spec.user_namespace) { // as root: owned by the kernel's uid, which it becomes
        options += ",uid=" + std::to_string(spec.uid) + ",gid=" + std::to_string(spec.gid);
    }
    const unsigned long read_only_flags = read_only ? MS_RDONLY | MS_NOEXEC : 0;
    const unsigned long flags = MS_NOSUID | MS_NODEV | read_only_flags;
    return check(::mount("tmpfs", path.c_str(), "tmpfs", flags, options.c_str()),
                 "tmpfs on " + path);
}

// A hidden path under a bound one: an empty read-only directory, or /dev/null for a file.
status hide(const std::string& path, const protocol::sandbox_spec& spec) {
    const std::string to = new_root + path;
    struct stat st {};
    if (::lstat(to.c_str(), &st) != 0) {
        return ok_status(); // not visible anyway
    }
    if (S_ISDIR(st.st_mode)) {
        return mount_tmpfs(to, spec, true);
    }
    const std::string null = std::string(old_root) + "/dev/null";
    if (::mount(null.c_str(), to.c_str(), nullptr, MS_BIND, nullptr) != 0) {
        return sys_error("hide " + path);
    }
    return remount(to, true);
}

// Each root kept whole at staging_dir/INDEX (for `kpool-sandbox workdir` to bind a part of it
// later), and an empty directory at its own path where that part will go. staging_dir ends as
// mode 0000 on the read-only root: the kernel, with no capability, can neither enter nor change it.
status stage_roots(const protocol::sandbox_spec& spec) {
    const std::string staging = new_root + std::string(protocol::staging_dir);
    if (::mkdir(staging.c_str(), 0700) != 0) {
        return sys_error("mkdir " + staging);
    }
    for (std::size_t i = 0; i < spec.roots.size(); ++i) {
        const std::string& root = spec.roots[i];
        if (!root.starts_with('/')) {
            continue;
        }
        if (auto st = bind(resolve_parents(root), false,
                           std::string(protocol::staging_dir) + "/" + std::to_string(i));
            !st) {
            return st;
        }
        if (auto made = make_dirs(new_root + root); !made) {
            return made;
        }
    }
    return check(::chmod(staging.c_str(), 0), "chmod " + staging);
}

status minimal_dev() {
    const std::string dev = std::string(new_root) + "/dev";
    if (auto made = make_dirs(dev); !made) {
        return made;
    }
    if (::mount("tmpfs", dev.c_str(), "tmpfs", MS_NOSUID | MS_NOEXEC, "mode=0755") != 0) {
        return sys_error("tmpfs on /dev");
    }
    for (const char* name : devices) {
        const std::string from = std::string(old_root) + "/dev/" + name;
        const std::string to = dev + "/" + name;
        if (::access(from.c_str(), F_OK) != 0) {
            continue;
        }
        const int fd = ::open(to.c_str(), O_CREAT | O_WRONLY | O_CLOEXEC, 0600);
        if (fd < 0) {
            return sys_error("create " + to);
        }
        ::close(fd);
        if (::mount(from.c_str(), to.c_str(), nullptr, MS_BIND, nullptr) != 0) {
            return sys_error("bind /dev/" + std::string(name));
        }
    }
    // Pseudo-terminals of its own (a new devpts instance): octave_kernel, pexpect, `script`
    // need them; another kernel's terminals are not in it.
    const std::string pts = dev + "/pts";
    if (::mkdir(pts.c_str(), 0755) != 0 ||
        ::mount("devpts", pts.c_str(), "devpts", MS_NOSUID | MS_NOEXEC,
                "newinstance,ptmxmode=0666,mode=620") != 0) {
        return sys_error("devpts on /dev/pts");
    }
    const std::pair<const char*, const char*> links[] = {
        {"ptmx", "pts/ptmx"},          {"fd", "/proc/self/fd"},       {"stdin", "/proc/self/fd/0"},
        {"stdout", "/proc/self/fd/1"}, {"stderr", "/proc/self/fd/2"},
    };
    for (const auto& [name, target] : links) {
        if (::symlink(target, (dev + "/" + name).c_str()) != 0) {
            return sys_error(std::string("symlink /dev/") + name);
        }
    }
    return ok_status();
}

status own_proc() {
    const std::string proc = std::string(new_root) + "/proc";
    if (auto made = make_dirs(proc); !made) {
        return made;
    }
    if (::mount("proc", proc.c_str(), "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0) {
        return sys_error("mounting a /proc of the kernel's own pid namespace (a container's masked "
                         "/proc or its seccomp profile refuses it: see docs/security.md)");
    }
    return ok_status();
}

} // namespace

status build_root(const protocol::sandbox_spec& spec) {
    // Every path the spec names, resolved while the host's root is still "/", by strength.
    std::map<std::string, kind> paths;
    const auto add = [&](const std::vector<std::string>& list, kind k) {
        for (const std::string& p : list) {
            if (!p.starts_with('/')) {
                continue;
            }
            const std::string real = resolve_parents(p);
            auto [it, fresh] = paths.emplace(real, k);
            if (!fresh) {
                it->second = std::max(it->second, k);
            }
        }
    };
    add(spec.readable, kind::readable);
    add(spec.files, kind::file);
    add(spec.writable, kind::writable);
    add(spec.private_dirs, kind::private_dir);
    add(spec.hidden, kind::hidden);

    // Nothing we mount may reach the host's namespace.
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
        return sys_error("making / private");
    }
    // An empty tmpfs as the root while the new one is built (bubblewrap's way), the host's
    // root beneath it at /oldroot.
    if (::mount("tmpfs", "/tmp", "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) {
        return sys_error("tmpfs for the new root");
    }
    if (::chdir("/tmp") != 0 || ::mkdir("newroot", 0755) != 0 || ::mkdir("oldroot", 0755) != 0) {
        return sys_error("preparing the new root");
    }
    if (::syscall(SYS_pivot_root, ".", "oldroot") != 0 || ::chdir("/") != 0) {
        return sys_error("pivot_root to the building root");
    }
    if (::mount("tmpfs", new_root, "tmpfs", MS_NOSUID | MS_NODEV, "mode=0755") != 0) {
        return sys_error("tmpfs on the new root");
    }
    if (auto st = minimal_dev(); !st) {
        return st;
    }
    if (auto st = own_proc(); !st) {
        return st;
    }
    // Parents before children (a path sorts before the paths below it).
    for (const auto& [path, k] : paths) {
        status st = ok_status();
        switch (k) {
        case kind::readable: st = bind(path, true); break;
        case kind::file:
        case kind::writable: st = bind(path, false); break;
        case kind::private_dir: st = mount_tmpfs(new_root + path, spec, false); break;
        case kind::hidden: st = hide(path, spec); break;
        }
        if (!st) {
            return st;
        }
    }
    if (auto st = stage_roots(spec); !st) {
        return st;
    }
    if (!spec.cwd.empty()) {
        if (auto made = make_dirs(new_root + spec.cwd); !made) {
            return made;
        }
    }
    // The new root becomes "/", and the host's (with the building root) is detached: nothing
    // of it stays reachable, not even through "..".
    if (::chdir(new_root) != 0 || ::syscall(SYS_pivot_root, ".", ".") != 0 ||
        ::umount2(".", MNT_DETACH) != 0 || ::chdir("/") != 0) {
        return sys_error("pivot_root to the kernel's root");
    }
    // The root's own directory is nobody's to write in.
    return check(
        ::mount(nullptr, "/", nullptr, MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr),
        "remount / read-only");
}

} // namespace kpool::sandbox
