// The token kpool serve makes when none is configured (and --no-token is not given): random,
// new for every run, written 0600 to DIR/serve-PORT.token in a 0700 directory of the user's own
// (the runtime directory kpoold uses), so the same user's clients can read it and nobody else
// can; removed when kpool serve stops.
#pragma once

#include "protocol/result.hpp"

#include <memory>
#include <string>

namespace kpool::serve {

// 32 random bytes, hex: what a generated token is.
std::string new_token();

class token_file {
public:
    // Creates `dir` (0700) if missing and refuses one that another user owns or others may write.
    static result<std::unique_ptr<token_file>> write(const std::string& dir, int port,
                                                     const std::string& token);
    ~token_file(); // removes the file
    token_file(const token_file&) = delete;
    token_file& operator=(const token_file&) = delete;

    const std::string& path() const { return m_path; }

private:
    explicit token_file(std::string path) : m_path(std::move(path)) {}
    std::string m_path;
};

} // namespace kpool::serve
