// Finding the program a kernel runs, as execvp would, and saying clearly when it is missing.
#pragma once

#include "protocol/result.hpp"

#include <string>

namespace kpool::jupyter {

// The path execvp would run for `file` (a name with a slash is taken as it is), searching
// `path_var` (a $PATH value), or an error naming what is missing: "cannot start FILE: ...".
result<std::string> resolve_executable(const std::string& file, const std::string& path_var);

// strerror's text with its first letter in lower case, to sit inside a sentence.
std::string lowercase_first(std::string s);

} // namespace kpool::jupyter
