// Where kpool lives when the config does not say: runtime directory and control endpoint.
#pragma once

#include <string>

namespace kpool::config {

// $XDG_RUNTIME_DIR/kpool when that directory exists, else /run/kpool as root, else
// /tmp/kpool-<uid> (which the daemon refuses to use if someone else owns it).
// The daemon and its clients compute the same answer, so neither needs to be told.
std::string default_runtime_dir();

// ipc://<runtime_dir>/control
std::string default_control_endpoint(const std::string& runtime_dir);

} // namespace kpool::config
