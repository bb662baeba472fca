// Private files on disk: the runtime directory, connection files, ipc socket paths.
#pragma once

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

// An exclusive flock held for the daemon's life on a lock file next to its control socket, so a
// second daemon on the same endpoint refuses to start instead of silently taking the socket over
// (libzmq unlinks an existing ipc path when it binds). The file, holding the owner's pid, is
// removed when the lock is released.
class endpoint_lock {
public:
    // Locks `path`; the error names the pid of the daemon that holds it.
    static result<endpoint_lock> acquire(const std::string& path);
    endpoint_lock(endpoint_lock&& other) noexcept;
    endpoint_lock& operator=(endpoint_lock&&) = delete;
    endpoint_lock(const endpoint_lock&) = delete;
    ~endpoint_lock();

private:
    endpoint_lock(std::string path, int fd) : m_path(std::move(path)), m_fd(fd) {}
    std::string m_path;
    int m_fd;
};

// Removes a kernel's connection file and, for ipc, its five socket files. Missing files are fine.
void remove_kernel_files(const std::string& connection_file,
                         const protocol::connection_info& info);

} // namespace kpool::daemon
