// The kpool command's exit statuses, one table for every command (README, "Exit status").
#pragma once

namespace kpool::cli::exit_status {

inline constexpr int ok = 0;
inline constexpr int failed = 1;        // kpoold said no; the code or a cell raised
inline constexpr int usage = 2;         // bad usage or bad input
inline constexpr int unreachable = 3;   // no daemon answered, or it refused this client
inline constexpr int interrupted = 130; // SIGINT or SIGTERM: the kernel was interrupted
inline constexpr int kernel_died = 138;

} // namespace kpool::cli::exit_status
