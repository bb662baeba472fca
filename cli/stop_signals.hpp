// SIGINT and SIGTERM for the commands that run code (exec, run): a signal is recorded, blocking
// waits return (no SA_RESTART), and the command interrupts its kernel and cleans up.
#pragma once

namespace kpool::cli {

// Installs the handlers.
void catch_stop_signals();
// The signal caught since catch_stop_signals, or 0.
int stop_signal();
// stop_signal() != 0, as the libraries' "cancelled" predicate.
inline bool stop_requested() { return stop_signal() != 0; }

} // namespace kpool::cli
