// sandbox_plan: a sandboxed pool's kernels' namespaces, filesystem and identity (sandbox_plan.hpp).
#include "daemon/process/sandbox_plan.hpp"

#include "loop/unique_fd.hpp"

#include <fcntl.h>
#include <linux/openat2.h>
#include <pwd.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

namespace kpool::daemon {
namespace {

namespace fs = std::filesystem;

bool within(const std::string& path, const std::string& root) {
    return path == root || root == "/" || path.starts_with(root + "/");
}

// A program's installations outside /usr: PREFIX of PREFIX/bin/NAME, as named (a venv, whose
// python is a link to the system's and whose packages are beside it) and with links resolved
// (conda, pyenv, a build of its own).
std::vector<std::string> prefixes_of(const std::string& program) {
    std::vector<std::string> found;
    std::error_code ec;
    const fs::path real = fs::canonical(program, ec);
    for (const fs::path& path : {fs::path(program).lexically_normal(), ec ? fs::path() : real}) {
        const std::string prefix = path.parent_path().parent_path().string();
        if (path.is_absolute() && !within(path.string(), "/usr") && prefix != "/" &&
            !prefix.empty()) {
            found.push_back(prefix);
        }
    }
    return found;
}

} // namespace

std::string find_sandbox_helper() {
    std::error_code ec;
    const fs::path self = fs::read_symlink("/proc/self/exe", ec);
    if (ec) {
        return "";
    }
    for (const fs::path& candidate :
         {self.parent_path() / "kpool-sandbox",
          self.parent_path().parent_path() / "lib" / "kpool" / "kpool-sandbox"}) {
        if (::access(candidate.c_str(), X_OK) == 0) {
            return candidate.string();
        }
    }
    return "";
}

sandbox_plan plan_sandbox(const config::pool_config& pc, const jupyter::resolved_kernelspec& spec,
                          const std::vector<std::string>& hidden) {
    sandbox_plan plan;
    protocol::sandbox_spec& s = plan.base;
    s.network = pc.sandbox.network;
    s.user_namespace = ::geteuid() != 0;
    if (s.user_namespace) {
        s.uid = ::getuid();
        s.gid = ::getgid();
    } else if (const passwd* pw = ::getpwnam(pc.sandbox.user.c_str());
               pw != nullptr && pw->pw_uid != 0) {
        s.uid = pw->pw_uid;
        s.gid = pw->pw_gid;
    } else {
        plan.problem = "[pools." + pc.name + ".sandbox] user \"" + pc.sandbox.user +
                       "\" is not a user of this host other than root";
    }
    s.readable = system_readable;
    s.readable.push_back(spec.spec.resource_dir); // kernel.json, logos, a kernel's own files
    for (const std::string& program : {spec.program, pc.python}) {
        for (const std::string& prefix : prefixes_of(program)) {
            s.readable.push_back(prefix);
        }
    }
    s.readable.insert(s.readable.end(), pc.sandbox.readable.begin(), pc.sandbox.readable.end());
    s.writable = pc.sandbox.writable;
    s.roots =
        pc.sandbox.roots; // none visible until an acquire's cwd is bound (sandbox/workdir.hpp)
    s.private_dirs = private_scratch;
    const char* home = std::getenv("HOME");
    const std::string home_dir = home != nullptr && home[0] == '/' ? home : "/home/kpool";
    s.private_dirs.push_back(home_dir);
    s.cwd = home_dir; // its own empty HOME until an acquire names a cwd
    s.hidden = hidden;
    plan.helper = find_sandbox_helper();
    if (plan.helper.empty() && plan.problem.empty()) {
        plan.problem = "kpool-sandbox is not installed beside kpoold (or in ../lib/kpool)";
    }
    return plan;
}

bool within_roots(const std::string& cwd, const std::vector<std::string>& roots) {
    const std::string normal = fs::path(cwd).lexically_normal().string();
    if (normal.empty() || normal.front() != '/') {
        return false;
    }
    for (const std::string& root : roots) {
        if (within(normal, root)) {
            return true;
        }
    }
    return false;
}

std::string workdir_problem(const std::string& cwd, const std::vector<std::string>& roots) {
    std::string normal = fs::path(cwd).lexically_normal().string();
    if (normal.size() > 1 && normal.ends_with('/')) {
        normal.pop_back();
    }
    for (const std::string& root : roots) {
        if (!within(normal, root)) {
            continue;
        }
        const std::string rel =
            normal.size() > root.size() ? normal.substr(root.size() + (root == "/" ? 0 : 1)) : "";
        const loop::unique_fd root_fd(::open(root.c_str(), O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (!root_fd) {
            return "root " + root + ": " + std::strerror(errno);
        }
        if (rel.empty()) {
            return "";
        }
        open_how how{};
        how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
        how.resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
        const loop::unique_fd dir(
            static_cast<int>(::syscall(SYS_openat2, root_fd.get(), rel.c_str(), &how, sizeof how)));
        if (!dir) {
            return errno == ELOOP ? "a symbolic link on the way (not followed)"
                                  : std::strerror(errno);
        }
        return "";
    }
    return "not within the roots";
}

void limits_without_cgroup(const config::kernel_limits& limits, protocol::sandbox_spec& spec,
                           std::vector<resource_limit>& rlimits) {
    if (limits.memory_mb > 0) {
        rlimits.push_back({RLIMIT_AS, static_cast<std::uint64_t>(limits.memory_mb) << 20});
    }
    if (limits.processes > 0 && spec.user_namespace) {
        spec.processes = static_cast<std::uint64_t>(limits.processes) + 1; // + its init
    }
}

result<std::string> make_private_ipc_dir(const std::string& prefix,
                                         const protocol::sandbox_spec& spec) {
    const std::string own = prefix + ".d";
    if (::mkdir(own.c_str(), 0700) != 0 ||
        (!spec.user_namespace && ::chown(own.c_str(), spec.uid, spec.gid) != 0)) {
        const int err = errno;
        ::rmdir(own.c_str());
        return error{errc::internal, "cannot make " + own + ": " + std::strerror(err)};
    }
    return own + "/k";
}

void remove_private_ipc_dir(const std::string& private_prefix) {
    ::rmdir(private_prefix.substr(0, private_prefix.rfind('/')).c_str());
}

nlohmann::json sandbox_plan::describe(const config::kernel_limits& limits,
                                      const std::string& cgroups) const {
    nlohmann::json namespaces = {"mount", "pid", "ipc"};
    if (base.user_namespace) {
        namespaces.push_back("user");
    }
    if (!base.network) {
        namespaces.push_back("network");
    }
    nlohmann::json j{
        {"namespaces", namespaces},
        {"uid", base.uid},
        {"network", base.network ? "host" : "own loopback only"},
        {"capabilities", "none (no_new_privs, seccomp deny-list)"},
        {"readable", base.readable},
        {"writable", base.writable},
        {"private", base.private_dirs},
        {"roots", base.roots},
        {"workdir",
         "the acquire's cwd under a root, bound writable alone (the rest of the roots unseen)"},
        {"helper", helper}};
    if (!problem.empty()) {
        j["problem"] = problem;
    }
    if (limits.memory_mb > 0 || limits.processes > 0) {
        const std::string together = cgroups + ", the kernel and what it starts together";
        j["limits"] = {
            {"memory_mb", limits.memory_mb},
            {"processes", limits.processes},
            {"memory_by", limits.memory_mb == 0 ? ""
                          : !cgroups.empty()
                              ? together
                              : "RLIMIT_AS, each process alone (kpoold can write no cgroup)"},
            {"processes_by", limits.processes == 0 ? ""
                             : !cgroups.empty()    ? together
                             : base.user_namespace
                                 ? "RLIMIT_NPROC in the kernel's own user namespace "
                                   "(kpoold can write no cgroup)"
                                 : "not enforced: kpoold can write no cgroup"}};
    }
    return j;
}

} // namespace kpool::daemon
