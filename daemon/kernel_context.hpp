// The code that applies a client's working directory and environment inside a warm kernel.
//
// jupyter_server and nbclient start kernels with a cwd and extra environment variables; a pooled
// kernel already runs, so the daemon executes a small language-specific snippet in it (silently:
// no history, no execution count) before handing it over, as hotpot_km does for Voila.
#pragma once

#include <map>
#include <optional>
#include <string>

namespace kpool::daemon {

// The snippet template for a kernel language, if kpool knows one ("python").
std::optional<std::string> builtin_context_snippet(const std::string& language);

// `snippet_template` with "{context}" replaced by a double-quoted JSON string literal holding
// {"cwd": <string or null>, "env": {...}}; such a literal is a valid string in Python, R,
// Julia, JavaScript and most languages, so a template only has to decode JSON.
std::string render_context_snippet(const std::string& snippet_template,
                                   const std::optional<std::string>& cwd,
                                   const std::map<std::string, std::string>& env);

} // namespace kpool::daemon
