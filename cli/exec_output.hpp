// What `kpool exec` shows of a snippet's outputs, local or through a kpool serve: streams to
// their own streams, results' text/plain on stdout, an error's traceback on stderr; and Python's
// SystemExit taken as `python -c` takes it (the code's own exit status, quietly).
#pragma once

#include <nlohmann/json.hpp>

#include <cstdio>
#include <optional>
#include <string>

namespace kpool::cli {

void write_all(std::FILE* stream, const std::string& text);

// What the terminal shows of one output (in-memory nbformat: text fields one string).
void show(const nlohmann::json& output);

// Python's SystemExit, as `python -c` treats it: the code's own exit status, quietly. IPython
// shows it as an error ("An exception has occurred, use %tb ...") followed by a warning on
// stderr ("To exit: use 'exit', 'quit', or Ctrl-D."); neither is shown here.
class python_exit {
public:
    // Whether `output` is part of the exit's noise (then not shown).
    bool swallows(const nlohmann::json& output);
    std::optional<int> code() const { return m_code; }

private:
    std::optional<int> m_code;
};

} // namespace kpool::cli
