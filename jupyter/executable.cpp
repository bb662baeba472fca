// resolve_executable: execvp's search, done ahead of time so errors name the program.
#include "jupyter/executable.hpp"

#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>
#include <sstream>

namespace kpool::jupyter {

std::string lowercase_first(std::string s) {
    if (!s.empty()) {
        s[0] = static_cast<char>(std::tolower(static_cast<unsigned char>(s[0])));
    }
    return s;
}

result<std::string> resolve_executable(const std::string& file, const std::string& path_var) {
    if (file.empty()) {
        return error{errc::internal, "the kernel's argv[0] is empty"};
    }
    if (file.find('/') != std::string::npos) {
        if (::access(file.c_str(), X_OK) != 0) {
            return error{errc::internal,
                         "cannot start " + file + ": " + lowercase_first(std::strerror(errno))};
        }
        return file;
    }
    std::stringstream dirs(path_var.empty() ? "/usr/local/bin:/usr/bin:/bin" : path_var);
    for (std::string dir; std::getline(dirs, dir, ':');) {
        const std::string candidate = (dir.empty() ? "." : dir) + "/" + file;
        if (::access(candidate.c_str(), X_OK) == 0) {
            return candidate;
        }
    }
    return error{errc::internal, "cannot start " + file + ": not found on PATH"};
}

} // namespace kpool::jupyter
