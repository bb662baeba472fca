// A client's working directory and environment, applied inside a warm kernel.
//
// jupyter_server and nbclient start kernels with a cwd and extra environment variables; a pooled
// kernel already runs, so the daemon executes a small language-specific snippet in it (silently:
// no history, no execution count) before handing it over, as hotpot_km does for Voila. Each
// language's snippet (languages/<name>.cpp) writes the values as its own string literals, so any
// path or value works, and leaves nothing in the user's namespace; other languages take a
// `context_snippet` template from the pool's config, rendered here.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

namespace kpool::languages {

struct kernel_context {
    std::optional<std::string> cwd;
    std::map<std::string, std::string> env;
    // An IPython kernel's history moved to memory (a one-shot run's, as papermill's kernels):
    // nothing of the run reaches the user's history.sqlite. No-op for other kernels.
    bool memory_history = false;
};

// A config `context_snippet`: "{context}" replaced by a double-quoted JSON string literal
// holding {"cwd": <string or null>, "env": {...}}, plain ASCII (non-ASCII as \u escapes); such a
// literal is a valid string in Python, R, Julia, JavaScript and most languages, so a template
// only has to decode JSON.
std::string render_context_snippet(const std::string& snippet_template,
                                   const kernel_context& context);

// A double-quoted literal with C-style escapes: backslash, the quote, control characters as
// \n, \t, \r or \xHH (R, Julia and Octave all read these); `also` lists characters the language
// treats specially inside such strings (Julia's '$'). UTF-8 passes through: kernels read code as
// UTF-8.
std::string c_style_literal(const std::string& value, std::string_view also = {});

} // namespace kpool::languages
