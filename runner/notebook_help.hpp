// papermill's --help-notebook: the parameters a notebook's parameters cell defines.
#pragma once

#include <cstdio>
#include <string>

namespace kpool::runner {

// Prints them as papermill does (to `out`; problems to `log`); the exit status: 0, 1 when no
// cell is tagged parameters (as papermill), 2 when the notebook cannot be read.
int print_notebook_help(const std::string& path, const std::string& kernel,
                        const std::string& language, std::FILE* out, std::FILE* log);

} // namespace kpool::runner
