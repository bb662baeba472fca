// The body of POST /v1/exec, read and checked before anything else happens: every field's type
// and range, unknown fields refused, so a misspelt field is never silently ignored.
#pragma once

#include "protocol/result.hpp"

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kpool::serve {

struct exec_body {
    std::string code;
    std::string kernel; // a pool name; empty: the server's default
    std::optional<std::chrono::milliseconds> timeout;
    std::string cwd; // absolute; empty: the kernel's own
    std::map<std::string, std::string> env;
};

// bad_request with a message that names the field.
result<exec_body> parse_exec_body(std::string_view body);

} // namespace kpool::serve
