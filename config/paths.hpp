// Where kpool lives when the config does not say: runtime directory and control endpoint.
#pragma once

#include <string>

namespace kpool::config {

// $XDG_RUNTIME_DIR/kpool when XDG_RUNTIME_DIR is set, /run/kpool as root, else /tmp/kpool-<uid>.
// The daemon and its clients compute the same answer, so neither needs to be told.
std::string default_runtime_dir();

// ipc://<runtime_dir>/control
std::string default_control_endpoint(const std::string& runtime_dir);

} // namespace kpool::config
