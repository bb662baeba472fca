// Reading and writing Jupyter notebooks (nbformat 4) exactly as Python's nbformat does.
//
// In memory a notebook is its JSON with multi-line fields joined into single strings (cell
// sources, stream text, text-like mime data), as nbformat.read gives it. On disk it is what
// nbformat.write produces, byte for byte: those fields split into lists of lines (Python's
// str.splitlines(keepends=True) rules), transient keys dropped, keys sorted, one space of
// indent, non-ASCII kept, a trailing newline. Pure code: no files, no sockets.
#pragma once

#include "protocol/result.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace kpool::notebook {

// Parses notebook JSON. Errors (bad_request) say "SOURCE:LINE:COL: ..." for invalid JSON, and
// what is wrong for JSON that is not an nbformat 4 notebook.
result<nlohmann::json> read_notebook(std::string_view text, const std::string& source);

// The file contents nbformat.write would produce for `nb` (an in-memory notebook).
std::string write_notebook(const nlohmann::json& nb);

// nbformat's JSON form of one output (text fields split into lines), as written in a file.
nlohmann::json output_for_file(const nlohmann::json& output);

// Python's str.splitlines(True): line ends kept; \n, \r, \r\n, \v, \f, \x1c-\x1e, U+0085,
// U+2028 and U+2029 end lines.
std::vector<std::string> split_lines(std::string_view text);

} // namespace kpool::notebook
