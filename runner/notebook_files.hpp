// Reading and writing notebooks for kpool run: stdin or a file in, a file written atomically out
// (by rename from a temporary file beside it, through a symlink, an existing file's mode kept),
// and the paths papermill reads through other I/O handlers, which kpool run refuses.
#pragma once

#include "protocol/result.hpp"

#include <string>

namespace kpool::runner {

// The text of `path`, or of stdin for "-".
result<std::string> read_notebook_text(const std::string& path);

// OUTPUT is written by rename from a temporary file beside it: its directory must take new
// files, and it must not be a directory. "-" (stdout) always can.
status check_output_writable(const std::string& path);

// Writes `text` to `path` through a temporary file and a rename.
status write_atomically(const std::string& path, const std::string& text);

// OUTPUT's path once resolved through symlinks (papermill writes through the link).
std::string output_target(const std::string& output);

// A path papermill reads through another I/O handler (s3://, gs://, http(s)://, ...): kpool
// run reads and writes local files only.
bool is_remote_path(const std::string& path);

} // namespace kpool::runner
