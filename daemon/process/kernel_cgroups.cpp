// kernel_cgroups: per-kernel memory and process limits through cgroups (kernel_cgroups.hpp).
#include "daemon/process/kernel_cgroups.hpp"

#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace kpool::daemon {
namespace {

constexpr long cgroup2_magic = 0x63677270; // CGROUP2_SUPER_MAGIC
constexpr const char* v2_root = "/sys/fs/cgroup";
constexpr const char* v1_memory = "/sys/fs/cgroup/memory";
constexpr const char* v1_pids = "/sys/fs/cgroup/pids";

bool write_text(const std::string& path, const std::string& text) {
    std::ofstream out(path);
    out << text;
    out.flush();
    return static_cast<bool>(out);
}

std::string read_text(const std::string& path) {
    std::ifstream in(path);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
}

bool is_cgroup2(const char* path) {
    struct statfs st {};
    return ::statfs(path, &st) == 0 && static_cast<long>(st.f_type) == cgroup2_magic;
}

bool writable_dir(const char* path) { return ::access(path, W_OK) == 0; }

// "oom_kill N" in memory.events (v2) or memory.oom_control (v1).
long oom_kills(const std::string& file) {
    std::istringstream lines(read_text(file));
    std::string key;
    long value = 0;
    while (lines >> key >> value) {
        if (key == "oom_kill") {
            return value;
        }
    }
    return 0;
}

} // namespace

kernel_cgroup::kernel_cgroup(std::vector<std::string> dirs, int memory_mb, bool v2)
    : m_dirs(std::move(dirs)), m_memory_mb(memory_mb), m_v2(v2) {}

kernel_cgroup::~kernel_cgroup() {
    for (const std::string& dir : m_dirs) {
        ::rmdir(dir.c_str()); // EBUSY only if a process survived, which the pid namespace forbids
    }
}

std::vector<std::string> kernel_cgroup::procs() const {
    std::vector<std::string> out;
    for (const std::string& dir : m_dirs) {
        out.push_back(dir + "/cgroup.procs");
    }
    return out;
}

bool kernel_cgroup::oom_killed() const {
    if (m_dirs.empty() || m_memory_mb == 0) {
        return false;
    }
    return oom_kills(m_dirs.front() + (m_v2 ? "/memory.events" : "/memory.oom_control")) > 0;
}

kernel_cgroups::kernel_cgroups(std::string run) {
    const std::string name = "/kpool-" + run;
    if (is_cgroup2(v2_root) && writable_dir(v2_root)) {
        m_how = "cgroup v2";
        m_v2 = true;
        m_parents = {v2_root + name};
    } else if (!is_cgroup2(v2_root) && writable_dir(v1_memory) && writable_dir(v1_pids)) {
        m_how = "cgroup v1 (memory, pids)";
        m_parents = {v1_memory + name, v1_pids + name};
    }
}

kernel_cgroups::~kernel_cgroups() {
    if (m_made) {
        for (const std::string& parent : m_parents) {
            ::rmdir(parent.c_str());
        }
    }
}

status kernel_cgroups::make_parents() {
    if (m_made) {
        return ok_status();
    }
    if (m_v2) {
        // The root's subtree_control usually has them already (systemd); ours must.
        write_text(std::string(v2_root) + "/cgroup.subtree_control", "+memory +pids");
    }
    for (const std::string& parent : m_parents) {
        if (::mkdir(parent.c_str(), 0755) != 0 && errno != EEXIST) {
            return error{errc::internal, "mkdir " + parent + ": " + std::strerror(errno)};
        }
    }
    if (m_v2 && !write_text(m_parents.front() + "/cgroup.subtree_control", "+memory +pids")) {
        return error{errc::internal,
                     "cannot enable the memory and pids controllers in " + m_parents.front()};
    }
    m_made = true;
    return ok_status();
}

result<std::unique_ptr<kernel_cgroup>> kernel_cgroups::create(const std::string& kernel,
                                                              int memory_mb, int processes) {
    if (m_parents.empty()) {
        return error{errc::internal, "no cgroup kpoold can write"};
    }
    if (auto st = make_parents(); !st) {
        return st.err();
    }
    std::vector<std::string> dirs;
    for (const std::string& parent : m_parents) {
        dirs.push_back(parent + "/" + kernel);
        if (::mkdir(dirs.back().c_str(), 0755) != 0 && errno != EEXIST) {
            const int err = errno;
            for (const std::string& d : dirs) {
                ::rmdir(d.c_str());
            }
            return error{errc::internal, "mkdir " + dirs.back() + ": " + std::strerror(err)};
        }
    }
    auto group = std::make_unique<kernel_cgroup>(dirs, memory_mb, m_v2);
    const std::string bytes = std::to_string(static_cast<long long>(memory_mb) << 20);
    const std::string memory_file =
        dirs.front() + (m_v2 ? "/memory.max" : "/memory.limit_in_bytes");
    const std::string pids_file = dirs.back() + "/pids.max";
    if (memory_mb > 0 && !write_text(memory_file, bytes)) {
        return error{errc::internal, "cannot write " + memory_file};
    }
    if (m_v2 && memory_mb > 0) {
        write_text(dirs.front() + "/memory.swap.max",
                   "0"); // the limit is memory, not memory + swap
    }
    if (processes > 0 && !write_text(pids_file, std::to_string(processes))) {
        return error{errc::internal, "cannot write " + pids_file};
    }
    return group;
}

} // namespace kpool::daemon
