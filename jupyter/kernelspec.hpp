// Finding and reading kernelspecs (kernel.json) the way jupyter_client does.
#pragma once

#include "protocol/result.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

namespace kpool::jupyter {

struct kernelspec {
    std::string name;         // directory name, lower-cased as jupyter_client does
    std::string resource_dir; // the directory holding kernel.json
    std::vector<std::string> argv;
    std::string display_name;
    std::string language;
    std::string interrupt_mode = "signal";
    std::map<std::string, std::string> env;
    nlohmann::json metadata = nlohmann::json::object();
    bool operator==(const kernelspec&) const = default;
};

// A pool's kernelspec as read at start (or reload) and the program it runs: kernels start from
// this, so no kernel start reads files on the loop thread.
struct resolved_kernelspec {
    kernelspec spec;
    std::string program; // argv[0], resolved
    bool operator==(const resolved_kernelspec&) const = default;
};

// find_kernelspec, then resolve_kernel_program with the daemon's PATH.
result<resolved_kernelspec> resolve_pool_kernelspec(const std::string& name,
                                                    const std::string& python);

// The kernels/ directories searched, first match wins: $JUPYTER_PATH entries, the user data dir
// ($JUPYTER_DATA_DIR, else $XDG_DATA_HOME/jupyter, else ~/.local/share/jupyter),
// /usr/local/share/jupyter, /usr/share/jupyter.
std::vector<std::string> kernelspec_search_path();

// The first kernelspec of that name on the search path. unknown_pool-free: errors are internal
// with a message naming the name and what was wrong (missing, unreadable, invalid JSON, no argv).
result<kernelspec> find_kernelspec(const std::string& name);

// Every valid kernelspec on the search path (earlier directories shadow later ones).
std::vector<kernelspec> list_kernelspecs();

// Reads <dir>/kernel.json.
result<kernelspec> read_kernelspec(const std::string& dir, const std::string& name);

// argv with {connection_file}, {resource_dir} and {prefix} substituted; other {x} kept as is.
std::vector<std::string> format_argv(const kernelspec& spec, const std::string& connection_file);

// The program a kernel of `spec` runs: argv[0] resolved by kpool's rule. jupyter_client reads
// "python" and "python3" as its own interpreter (sys.executable), which a C++ daemon has not:
// for kpool they mean `python`, the pool's interpreter (config key `python`, by default
// /usr/bin/python3, Debian's, under which Debian's jupyter_client runs). Any other name without
// a slash is looked up on `path_var` as execvp would. An error names the kernelspec and the
// missing program.
result<std::string> resolve_kernel_program(const kernelspec& spec, const std::string& python,
                                           const std::string& path_var);

// Python's Template.safe_substitute: $VAR and ${VAR} from `lookup`, $$ -> $, unknown kept.
std::string expand_env_value(const std::string& value,
                             const std::map<std::string, std::string>& lookup);

} // namespace kpool::jupyter
