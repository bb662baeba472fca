// Where a kernel's ipc sockets live.
//
// jupyter_client's convention: with transport "ipc" the connection file's `ip` is a path prefix
// and channel N listens at `ipc://PREFIX-N`. Two limits make the prefix short: sun_path holds
// 107 bytes, and kernels built on xeus read their endpoints back into a 32-byte buffer
// (measured with xeus-python 0.14: a 23-character prefix starts, a 24-character one aborts with
// "zmq::error_t: Invalid argument"), so `ipc://PREFIX-N` must stay within 31 characters.
//
// The run's own directory is used when the prefix fits; otherwise a short private directory is
// made, first inside the runtime directory (where clients outside a systemd PrivateTmp see it),
// else under /tmp, and the log says so once. Short directories are listed in a file beside the
// run's lock (`<run>.ipc`), so the cleanup after a crashed run finds them too.
#pragma once

#include "protocol/result.hpp"

#include <string>
#include <vector>

namespace kpool::daemon {

class ipc_socket_dirs {
public:
    // The longest ipc endpoint every kernel accepts ("ipc://" included).
    static constexpr std::size_t max_endpoint = 31;

    // `run_dir`: this run's directory; `runtime_dir`: the daemon's; `list_file`: where the
    // short directories made are recorded.
    ipc_socket_dirs(std::string run_dir, std::string runtime_dir, std::string list_file);
    ~ipc_socket_dirs(); // removes the short directories (empty by then) and the list
    ipc_socket_dirs(const ipc_socket_dirs&) = delete;
    ipc_socket_dirs& operator=(const ipc_socket_dirs&) = delete;

    // The socket path prefix for a kernel called `name` (short: a few characters), in a private
    // directory; an error when no directory gives a short enough path.
    result<std::string> prefix_for(const std::string& name);

private:
    static bool fits(const std::string& dir, const std::string& name);
    result<std::string> make_short_dir(const std::string& parent);

    std::string m_run_dir;
    std::string m_runtime_dir;
    std::string m_list_file;
    std::vector<std::string> m_short_dirs;
};

// Removes the short socket directories a dead run listed in `list_file`, then the list.
void remove_listed_ipc_dirs(const std::string& list_file);

// `n` in base 36: short names for ipc socket prefixes.
std::string short_name(unsigned long long n);

} // namespace kpool::daemon
