// instance_dir: one locked directory per daemon run, and the sweep that cleans up dead runs.
#include "daemon/process/instance_dir.hpp"

#include "daemon/process/ipc_socket_dirs.hpp"

#include "loop/logging.hpp"
#include "protocol/hmac.hpp"

#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstring>
#include <filesystem>
#include <utility>

namespace kpool::daemon {
namespace {

constexpr std::string_view lock_suffix = ".lock";

// Kills every process of ours whose environment says it belongs to run `id`: the kernels of a
// dead daemon that outlived it (a parent-death signal reaches only direct children) and
// anything they started.
int kill_processes_of(const std::string& id) {
    const std::string marker = std::string(instance_env_var) + "=" + id;
    int killed = 0;
    std::unique_ptr<DIR, int (*)(DIR*)> proc(::opendir("/proc"), ::closedir);
    if (!proc) {
        return 0;
    }
    const pid_t self = ::getpid();
    while (const dirent* entry = ::readdir(proc.get())) {
        char* end = nullptr;
        const long pid = std::strtol(entry->d_name, &end, 10);
        if (pid <= 0 || *end != '\0' || pid == self) {
            continue;
        }
        auto environ_text =
            read_small_file("/proc/" + std::string(entry->d_name) + "/environ", 1 << 20);
        if (!environ_text) {
            continue; // gone, or not ours to read
        }
        std::string_view env(*environ_text);
        for (std::size_t pos = 0; pos < env.size();) {
            const std::size_t end_of_var = std::min(env.find('\0', pos), env.size());
            if (env.substr(pos, end_of_var - pos) == marker) {
                if (::kill(static_cast<pid_t>(pid), SIGKILL) == 0) {
                    ++killed;
                }
                break;
            }
            pos = end_of_var + 1;
        }
    }
    return killed;
}

} // namespace

result<instance_dir> instance_dir::create(const std::string& kernels_root) {
    // A fresh name each attempt: a sweeping daemon may take the lock on our file in the moment
    // between its creation and our flock (and then removes it), so on any failure start over.
    for (int attempt = 0; attempt < 10; ++attempt) {
        std::string id = std::to_string(::getpid()) + "-" + protocol::random_hex(4);
        const std::string lock_path = kernels_root + "/" + id + std::string(lock_suffix);
        auto lock = file_lock::acquire(lock_path, true);
        if (!lock) {
            continue;
        }
        lock->write_owner_pid();
        std::string path = kernels_root + "/" + id;
        if (::mkdir(path.c_str(), 0700) != 0) {
            return error{errc::internal, "cannot create " + path + ": " + std::strerror(errno)};
        }
        return instance_dir(std::move(id), std::move(path), std::move(lock).value());
    }
    return error{errc::internal, "cannot create a locked run directory in " + kernels_root};
}

instance_dir::instance_dir(instance_dir&& other) noexcept
    : m_id(std::exchange(other.m_id, {})), m_path(std::exchange(other.m_path, {})),
      m_lock(std::move(other.m_lock)) {
    other.m_lock.reset();
}

instance_dir::~instance_dir() {
    if (!m_path.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(m_path, ec); // empty unless this run ended abnormally
    }
    m_lock.reset(); // unlinks the lock file last: a directory without one is never ours
}

stale_sweep sweep_stale_instances(const std::string& kernels_root) {
    stale_sweep sweep;
    std::error_code ec;
    std::vector<std::string> ids;
    for (const auto& entry : std::filesystem::directory_iterator(kernels_root, ec)) {
        const std::string name = entry.path().filename().string();
        if (name.size() > lock_suffix.size() && name.ends_with(lock_suffix)) {
            ids.push_back(name.substr(0, name.size() - lock_suffix.size()));
        }
    }
    for (const std::string& id : ids) {
        bool held_elsewhere = false;
        auto lock = file_lock::acquire(kernels_root + "/" + id + std::string(lock_suffix), false,
                                       &held_elsewhere);
        if (!lock) {
            continue; // a live run (or it vanished meanwhile): not ours to touch
        }
        const int killed = kill_processes_of(id);
        std::filesystem::remove_all(kernels_root + "/" + id, ec);
        remove_listed_ipc_dirs(kernels_root + "/" + id + ".ipc"); // sockets kept elsewhere
        loop::logger("daemon")->warn("cleaned up after an earlier run that did not exit cleanly: "
                                     "run {}, {} leftover process(es) killed, files removed",
                                     id, killed);
        ++sweep.runs;
        sweep.processes += killed;
        // `lock` goes out of scope here and unlinks the lock file, after the directory.
    }
    return sweep;
}

} // namespace kpool::daemon
