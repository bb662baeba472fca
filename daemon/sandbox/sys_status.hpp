// A failed system call as a status: "what: strerror(errno)", for the helper's one-line errors.
#pragma once

#include "protocol/result.hpp"

#include <cerrno>
#include <cstring>
#include <string>

namespace kpool::sandbox {

// Exit status when the sandbox could not be made or changed (as env(1) and chroot(1) use 125).
inline constexpr int sandbox_failed = 125;

inline error sys_error(const std::string& what, int err = errno) {
    return error{errc::internal, what + ": " + std::strerror(err)};
}

// 0 (or any non-negative return) is fine, -1 is errno's failure.
inline status check(long rc, const std::string& what) {
    if (rc < 0) {
        return sys_error(what);
    }
    return ok_status();
}

} // namespace kpool::sandbox
