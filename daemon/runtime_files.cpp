// Runtime directory and connection file handling, with the permissions secrets need.
#include "daemon/runtime_files.hpp"

#include <fcntl.h>
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

// Closes a file descriptor when it goes out of scope.
class unique_fd {
public:
    explicit unique_fd(int fd) : m_fd(fd) {}
    ~unique_fd() {
        if (m_fd >= 0) {
            ::close(m_fd);
        }
    }
    unique_fd(const unique_fd&) = delete;
    unique_fd& operator=(const unique_fd&) = delete;
    int get() const { return m_fd; }
    int release_and_close() {
        const int rc = ::close(m_fd);
        m_fd = -1;
        return rc;
    }

private:
    int m_fd;
};

} // namespace

status ensure_private_dir(const std::string& dir) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    struct stat st{};
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
    unique_fd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600));
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
    if (fd.release_and_close() != 0 || ::rename(tmp.c_str(), path.c_str()) != 0) {
        const int err = errno;
        ::unlink(tmp.c_str());
        return sys_error("cannot write", path, err);
    }
    return ok_status();
}

result<std::string> read_small_file(const std::string& path, std::size_t max_bytes) {
    unique_fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
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

void remove_kernel_files(const std::string& connection_file,
                         const protocol::connection_info& info) {
    ::unlink(connection_file.c_str());
    ::unlink((connection_file + ".tmp").c_str());
    if (info.transport == "ipc") {
        for (std::uint16_t port : {info.shell_port, info.iopub_port, info.stdin_port,
                                   info.control_port, info.hb_port}) {
            ::unlink((info.ip + "-" + std::to_string(port)).c_str());
        }
    }
}

} // namespace kpool::daemon
