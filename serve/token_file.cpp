// token_file: a generated token written atomically (temp file, rename) with owner-only modes.
#include "serve/token_file.hpp"

#include "protocol/hmac.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kpool::serve {
namespace {

error failure(const std::string& what, const std::string& path) {
    return error{errc::unavailable, what + " " + path + ": " + std::strerror(errno)};
}

} // namespace

std::string new_token() { return protocol::random_hex(32); }

result<std::unique_ptr<token_file>> token_file::write(const std::string& dir, int port,
                                                      const std::string& token) {
    if (::mkdir(dir.c_str(), 0700) != 0 && errno != EEXIST) {
        return failure("cannot create the directory", dir);
    }
    struct stat st {};
    if (::lstat(dir.c_str(), &st) != 0) {
        return failure("cannot read", dir);
    }
    if (!S_ISDIR(st.st_mode) || st.st_uid != ::geteuid() || (st.st_mode & 022) != 0) {
        return error{errc::unavailable,
                     dir + " is not a directory of this user's that only it may write to: "
                           "the token file is not written there"};
    }
    const std::string path = dir + "/serve-" + std::to_string(port) + ".token";
    const std::string temp = path + ".tmp-" + std::to_string(::getpid());
    const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) {
        return failure("cannot create", temp);
    }
    const std::string text = token + "\n";
    const bool written = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    const bool closed = ::close(fd) == 0;
    if (!written || !closed || ::rename(temp.c_str(), path.c_str()) != 0) {
        const error e = failure("cannot write", path);
        ::unlink(temp.c_str());
        return e;
    }
    return std::unique_ptr<token_file>(new token_file(path));
}

token_file::~token_file() { ::unlink(m_path.c_str()); }

} // namespace kpool::serve
