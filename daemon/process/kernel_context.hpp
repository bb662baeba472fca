// The code that applies a client's working directory and environment inside a warm kernel.
//
// jupyter_server and nbclient start kernels with a cwd and extra environment variables; a pooled
// kernel already runs, so the daemon executes a small language-specific snippet in it (silently:
// no history, no execution count) before handing it over, as hotpot_km does for Voila.
//
// Built in: Python (ipykernel, xeus-python), R (IRkernel), Julia (IJulia), Octave and MATLAB
// (octave_kernel, matlab_kernel), bash. Each writes the values as its language's own string
// literals, so any path or value works; nothing is left in the user's namespace. Other
// languages take a `context_snippet` template from the pool's config.
#pragma once

#include "protocol/result.hpp"

#include <map>
#include <optional>
#include <string>

namespace kpool::daemon {

struct kernel_context {
    std::optional<std::string> cwd;
    std::map<std::string, std::string> env;
    // An IPython kernel's history moved to memory (a one-shot run's, as papermill's kernels):
    // nothing of the run reaches the user's history.sqlite. No-op for other kernels.
    bool memory_history = false;
};

// Python that moves a running IPython kernel's history to a fresh in-memory HistoryManager:
// its sqlite session taken back out of the user's file, In/Out/_ih/_oh/_dh rebound. Run with
// exec() in a namespace of its own; harmless where there is no IPython or it is done already.
extern const char* const memory_history_python;

// Whether kernels of `language` may have IPython's history (Python ones: ipykernel; in others,
// such as xeus-python, memory_history_python finds no IPython shell and does nothing).
bool may_have_ipython_history(const std::string& language);

// Whether kpool has a built-in snippet for a kernelspec's `language` (case does not matter).
bool has_builtin_context_snippet(const std::string& language);

// The built-in snippet for `language` applying `context`; an error for a language kpool does
// not know, or a value that language cannot take (an env name bash cannot export).
result<std::string> builtin_context_code(const std::string& language, const kernel_context& context);

// A config `context_snippet`: "{context}" replaced by a double-quoted JSON string literal
// holding {"cwd": <string or null>, "env": {...}}, plain ASCII (non-ASCII as \u escapes); such a
// literal is a valid string in Python, R, Julia, JavaScript and most languages, so a template
// only has to decode JSON.
std::string render_context_snippet(const std::string& snippet_template, const kernel_context& context);

} // namespace kpool::daemon
