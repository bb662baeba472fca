// notebook_files: where kpool run reads notebooks from and how it writes them.
#include "runner/notebook_files.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>

namespace kpool::runner {
namespace {

namespace fs = std::filesystem;

} // namespace

result<std::string> read_notebook_text(const std::string& path) {
    std::stringstream text;
    if (path == "-") {
        text << std::cin.rdbuf();
        return text.str();
    }
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return error{errc::bad_request, path + ": cannot read: " + std::strerror(errno)};
    }
    text << in.rdbuf();
    return text.str();
}

// OUTPUT is written by rename from a temp file beside it: the directory must take new files.
status check_output_writable(const std::string& path) {
    if (path == "-") {
        return ok_status();
    }
    const fs::path dir = fs::absolute(path).parent_path();
    std::string probe = (dir / ".kpool-probe-XXXXXX").string();
    const int fd = ::mkstemp(probe.data());
    if (fd < 0) {
        return error{errc::bad_request, path + ": cannot write there: " + std::strerror(errno)};
    }
    ::close(fd);
    ::unlink(probe.c_str());
    if (fs::is_directory(path)) {
        return error{errc::bad_request, path + ": is a directory"};
    }
    return ok_status();
}

status write_atomically(const std::string& path, const std::string& text) {
    const fs::path target = fs::absolute(path);
    std::string temp =
        (target.parent_path() / ("." + target.filename().string() + ".kpool-XXXXXX")).string();
    const int fd = ::mkstemp(temp.data());
    if (fd < 0) {
        return error{errc::bad_request, path + ": cannot write: " + std::strerror(errno)};
    }
    // An existing OUTPUT keeps its mode (papermill rewrites it in place); a new one gets what an
    // ordinary file would (mkstemp makes 0600).
    struct stat existing {};
    if (::stat(target.c_str(), &existing) == 0) {
        ::fchmod(fd, existing.st_mode & 07777);
    } else {
        const mode_t mask = ::umask(0);
        ::umask(mask);
        ::fchmod(fd, 0666 & ~mask);
    }
    std::size_t done = 0;
    while (done < text.size()) {
        const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            const int e = errno;
            ::close(fd);
            ::unlink(temp.c_str());
            return error{errc::bad_request, path + ": cannot write: " + std::strerror(e)};
        }
        done += static_cast<std::size_t>(n);
    }
    if (::close(fd) != 0 || ::rename(temp.c_str(), target.c_str()) != 0) {
        const int e = errno;
        ::unlink(temp.c_str());
        return error{errc::bad_request, path + ": cannot write: " + std::strerror(e)};
    }
    return ok_status();
}

std::string output_target(const std::string& output) {
    if (output == "-") {
        return output;
    }
    std::error_code ec;
    const fs::path resolved = fs::weakly_canonical(fs::absolute(output), ec);
    return ec ? output : resolved.string();
}

bool is_remote_path(const std::string& path) {
    static const char* const schemes[] = {"s3://",   "gs://",    "abs://",  "adl://",
                                          "http://", "https://", "wasb://", "wasbs://",
                                          "hdfs://", "gdrive://"};
    for (const char* scheme : schemes) {
        if (path.starts_with(scheme)) {
            return true;
        }
    }
    return false;
}

} // namespace kpool::runner
