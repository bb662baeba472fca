// Each kpoold run keeps its kernels' files in a directory of its own, locked for its lifetime:
//
//   <runtime_dir>/kernels/<instance>.lock   flock held while the run is alive
//   <runtime_dir>/kernels/<instance>/       connection files and ipc sockets of its kernels
//
// A daemon that was SIGKILLed leaves its directory behind, unlocked. The next daemon to start on
// the same runtime directory finds it, kills whatever processes that run left (each kernel
// carries KPOOL_INSTANCE=<instance> in its environment, and so do its children) and removes
// the files. A live daemon's lock is held, so a second daemon sharing the runtime directory is
// never touched.
#pragma once

#include "daemon/process/runtime_files.hpp"
#include "protocol/result.hpp"

#include <optional>
#include <string>

namespace kpool::daemon {

// The environment variable naming the run a kernel belongs to.
inline constexpr const char* instance_env_var = "KPOOL_INSTANCE";

class instance_dir {
public:
    // Creates and locks a fresh instance directory under `kernels_root` (a private directory).
    static result<instance_dir> create(const std::string& kernels_root);

    const std::string& id() const { return m_id; }
    const std::string& path() const { return m_path; }

    instance_dir(instance_dir&& other) noexcept;
    instance_dir& operator=(instance_dir&&) = delete;
    instance_dir(const instance_dir&) = delete;
    ~instance_dir(); // removes the directory, then the lock

private:
    instance_dir(std::string id, std::string path, file_lock lock)
        : m_id(std::move(id)), m_path(std::move(path)), m_lock(std::move(lock)) {}
    std::string m_id;
    std::string m_path; // empty once moved from
    std::optional<file_lock> m_lock;
};

struct stale_sweep {
    int runs = 0;      // dead runs whose files were removed
    int processes = 0; // their processes, killed
};

// Cleans up after every run under `kernels_root` whose lock nobody holds.
stale_sweep sweep_stale_instances(const std::string& kernels_root);

} // namespace kpool::daemon
