// ipc_socket_dirs: the shortest private directory that fits every kernel's endpoints.
#include "daemon/process/ipc_socket_dirs.hpp"

#include "daemon/process/runtime_files.hpp"
#include "loop/logging.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <sstream>

namespace kpool::daemon {

ipc_socket_dirs::ipc_socket_dirs(std::string run_dir, std::string runtime_dir,
                                 std::string list_file)
    : m_run_dir(std::move(run_dir)), m_runtime_dir(std::move(runtime_dir)),
      m_list_file(std::move(list_file)) {}

ipc_socket_dirs::~ipc_socket_dirs() {
    std::error_code ec;
    for (const std::string& dir : m_short_dirs) {
        std::filesystem::remove_all(dir, ec);
    }
    if (!m_short_dirs.empty()) {
        ::unlink(m_list_file.c_str());
    }
}

bool ipc_socket_dirs::fits(const std::string& dir, const std::string& name) {
    // "ipc://" + dir + "/" + name + "-N"
    return 6 + dir.size() + 1 + name.size() + 2 <= max_endpoint;
}

result<std::string> ipc_socket_dirs::prefix_for(const std::string& name) {
    if (fits(m_run_dir, name)) {
        return m_run_dir + "/" + name;
    }
    for (const std::string& dir : m_short_dirs) {
        if (fits(dir, name)) {
            return dir + "/" + name;
        }
    }
    // mkdtemp's six random characters after "/k" or "/kp-".
    for (const std::string& parent : {m_runtime_dir + "/k", std::string("/tmp/kp-")}) {
        if (!fits(parent + "XXXXXX", name)) {
            continue;
        }
        auto dir = make_short_dir(parent);
        if (!dir) {
            return dir.err();
        }
        return *dir + "/" + name;
    }
    return error{errc::internal, "no directory gives ipc socket paths short enough (" +
                                     std::to_string(max_endpoint) +
                                     " characters with ipc://) for kernel " + name};
}

result<std::string> ipc_socket_dirs::make_short_dir(const std::string& parent) {
    std::string templ = parent + "XXXXXX";
    if (::mkdtemp(templ.data()) == nullptr) { // 0700, ours, a name nobody else had
        return error{errc::internal, "cannot create a directory for ipc sockets at " + parent +
                                         "XXXXXX: " + std::strerror(errno)};
    }
    m_short_dirs.push_back(templ);
    std::string listing;
    for (const std::string& dir : m_short_dirs) {
        listing += dir + "\n";
    }
    if (auto st = write_private_file(m_list_file, listing); !st) {
        loop::logger("daemon")->warn("cannot record {} for the cleanup after a crash: {}", templ,
                                     st.err().message);
    }
    loop::logger("daemon")->info(
        "ipc sockets go to {}: the run directory {} makes endpoints longer "
        "than the {} characters some kernels (xeus) accept",
        templ, m_run_dir, max_endpoint);
    return templ;
}

void remove_listed_ipc_dirs(const std::string& list_file) {
    auto listing = read_small_file(list_file);
    if (!listing) {
        return;
    }
    std::stringstream lines(*listing);
    for (std::string dir; std::getline(lines, dir);) {
        struct stat st {};
        // Only a directory of ours: the list file is private, but be strict anyway.
        if (!dir.empty() && ::lstat(dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode) &&
            st.st_uid == ::geteuid()) {
            std::error_code ec;
            std::filesystem::remove_all(dir, ec);
        }
    }
    ::unlink(list_file.c_str());
}

std::string short_name(unsigned long long n) {
    static constexpr char digits[] = "0123456789abcdefghijklmnopqrstuvwxyz";
    std::string out;
    do {
        out.insert(out.begin(), digits[n % 36]);
        n /= 36;
    } while (n != 0);
    return out;
}

} // namespace kpool::daemon
