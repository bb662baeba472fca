// Where kpool lives when the config does not say: runtime and state directories, control endpoint.
#pragma once

#include <string>

namespace kpool::config {

// $XDG_RUNTIME_DIR/kpool when that directory exists, else /run/kpool as root, else
// /tmp/kpool-<uid> (which the daemon refuses to use if someone else owns it).
// The daemon and its clients compute the same answer, so neither needs to be told.
std::string default_runtime_dir();

// What kpoold keeps across restarts (the modules its pools learned to pre-import): systemd's
// $STATE_DIRECTORY (StateDirectory=kpool), else /var/lib/kpool as root, else
// $XDG_STATE_HOME/kpool, else ~/.local/state/kpool. Not beside the config file, which is often
// read-only (/etc) and shared by hosts whose kernels differ.
std::string default_state_dir();

// ipc://<runtime_dir>/control
std::string default_control_endpoint(const std::string& runtime_dir);

} // namespace kpool::config
