// Runtime directory and connection file handling, with the permissions secrets need.
#include "daemon/process/runtime_files.hpp"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace kpool::daemon {
namespace {

error sys_error(const std::string& what, const std::string& path, int err) {
    return {errc::internal, what + " " + path + ": " + std::strerror(err)};
}

} // namespace

status ensure_private_dir(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0) {
        return sys_error("cannot create directory", dir, errno);
    }
    if (!S_ISDIR(st.st_mode)) {
        return error{errc::internal, dir + " exists and is not a directory"};
    }
    if (st.st_uid != ::geteuid()) {
        return error{errc::internal, dir + " belongs to uid " + std::to_string(st.st_uid) +
                                         ", not to us (uid " + std::to_string(::geteuid()) +
                                         "): refusing to keep secrets there"};
    }
    if ((st.st_mode & 07777) != 0700 && ::chmod(dir.c_str(), 0700) != 0) {
        return sys_error("cannot chmod 0700", dir, errno);
    }
    return ok_status();
}

status write_private_file(const std::string& path, std::string_view contents) {
    const std::string tmp = path + ".tmp";
    ::unlink(tmp.c_str());
    loop::unique_fd fd(
        ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
    if (fd.get() < 0) {
        return sys_error("cannot create", tmp, errno);
    }
    std::size_t written = 0;
    while (written < contents.size()) {
        const ssize_t n = ::write(fd.get(), contents.data() + written, contents.size() - written);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            const int err = errno;
            ::unlink(tmp.c_str());
            return sys_error("cannot write", tmp, err);
        }
        written += static_cast<std::size_t>(n);
    }
    if (fd.close_checked() != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        return sys_error("cannot write", path, err);
    }
    return ok_status();
}

result<std::string> read_small_file(const std::string& path, std::size_t max_bytes) {
    loop::unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (fd.get() < 0) {
        return sys_error("cannot open", path, errno);
    }
    std::string data;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(fd.get(), buf, sizeof buf);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return sys_error("cannot read", path, errno);
        }
        if (n == 0) {
            return data;
        }
        data.append(buf, static_cast<std::size_t>(n));
        if (data.size() > max_bytes) {
            return error{errc::internal, path + " is larger than " + std::to_string(max_bytes)};
        }
    }
}

result<file_lock> file_lock::acquire(const std::string& path, bool create, bool* held_elsewhere) {
    if (held_elsewhere != nullptr) {
        *held_elsewhere = false;
    }
    // A lock on a file that its holder unlinked on its way out proves nothing: check that the
    // locked file is still the one at `path`, else try again.
    for (int attempt = 0; attempt < 10; ++attempt) {
        loop::unique_fd fd(
            ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | (create ? O_CREAT : 0), 0600));
        if (!fd) {
            return sys_error("cannot open lock file", path, errno);
        }
        if (::flock(fd.get(), LOCK_EX | LOCK_NB) != 0) {
            if (errno == EWOULDBLOCK && held_elsewhere != nullptr) {
                *held_elsewhere = true;
            }
            return sys_error("cannot lock", path, errno);
        }
        struct stat held {};
        struct stat now {};
        if (::fstat(fd.get(), &held) == 0 && ::stat(path.c_str(), &now) == 0 &&
            held.st_ino == now.st_ino && held.st_dev == now.st_dev) {
            return file_lock(path, std::move(fd));
        }
        if (!create) {
            return error{errc::internal, path + " went away"};
        }
    }
    return error{errc::internal, "cannot lock " + path + ": it keeps being replaced"};
}

void file_lock::write_owner_pid() {
    const std::string pid = std::to_string(::getpid()) + "\n";
    if (::ftruncate(m_fd.get(), 0) != 0 || ::pwrite(m_fd.get(), pid.data(), pid.size(), 0) < 0) {
        // The pid is informative only; the lock is what matters.
    }
}

std::string file_lock::owner_pid(const std::string& path) {
    auto text = read_small_file(path, 64);
    std::string owner = text ? *text : "";
    while (!owner.empty() && (owner.back() == '\n' || owner.back() == ' ')) {
        owner.pop_back();
    }
    return owner.empty() ? "?" : owner;
}

file_lock::~file_lock() {
    if (m_fd) {
        ::unlink(m_path.c_str()); // while still locked: nobody can hold a lock on this inode
    }
}

void remove_kernel_files(const std::string& connection_file,
                         const protocol::connection_info& info) {
    ::unlink(connection_file.c_str());
    ::unlink((connection_file + ".tmp").c_str());
    if (info.transport == "ipc") {
        for (std::uint16_t port :
             {info.shell_port, info.iopub_port, info.stdin_port, info.control_port, info.hb_port}) {
            ::unlink((info.ip + "-" + std::to_string(port)).c_str());
        }
    }
}

} // namespace kpool::daemon
