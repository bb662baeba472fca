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

// Removes a kernel's connection file and, for ipc, its five socket files. Missing files are fine.
void remove_kernel_files(const std::string& connection_file,
                         const protocol::connection_info& info);

} // namespace kpool::daemon
