// Private files on disk: the runtime directory, connection files, ipc socket paths.
#pragma once

#include "loop/unique_fd.hpp"
#include "protocol/connection_info.hpp"
#include "protocol/result.hpp"

#include <string>
#include <string_view>

namespace kpool::daemon {

// Creates `dir` (parents too) with mode 0700. An existing directory must belong to us; its mode
// is tightened to 0700. Refuses a directory owned by someone else (e.g. a squatted /tmp path).
status ensure_private_dir(const std::string& dir);

// Writes `contents` to `path` with mode 0600, atomically: readers see the old file or the new
// one, never a partial one (temp file in the same directory, then rename).
status write_private_file(const std::string& path, std::string_view contents);

// The whole file, or an error (missing, unreadable, larger than max_bytes).
result<std::string> read_small_file(const std::string& path, std::size_t max_bytes = 64 * 1024);

// An exclusive flock on a file, held for the object's life. The file is removed (while still
// locked, so nobody can be holding a lock on a file that is about to vanish) on release.
// kpoold holds one beside its control socket, so a second daemon on the same endpoint refuses
// to start instead of silently taking the socket over (libzmq unlinks an existing ipc path when
// it binds), and one per run for its kernel files (see instance_dir.hpp).
class file_lock {
public:
    // Locks `path` without waiting (creating the file if `create`). When another process holds
    // it, the error says so and *held_elsewhere is set.
    static result<file_lock> acquire(const std::string& path, bool create,
                                     bool* held_elsewhere = nullptr);
    // What write_owner_pid left in the lock file at `path`, or "?".
    static std::string owner_pid(const std::string& path);

    file_lock(file_lock&&) noexcept = default;
    file_lock& operator=(file_lock&&) = delete;
    file_lock(const file_lock&) = delete;
    ~file_lock();

    void write_owner_pid();

private:
    file_lock(std::string path, loop::unique_fd fd)
        : m_path(std::move(path)), m_fd(std::move(fd)) {}
    std::string m_path;
    loop::unique_fd m_fd;
};

// Removes a kernel's connection file and, for ipc, its five socket files. Missing files are fine.
void remove_kernel_files(const std::string& connection_file, const protocol::connection_info& info);

} // namespace kpool::daemon
