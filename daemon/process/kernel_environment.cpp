// kernel_environment: what a kernel's process starts with, whichever launcher starts it.
#include "daemon/process/kernel_environment.hpp"

#include "daemon/process/instance_dir.hpp"

#include <unistd.h>

#include <map>

extern char** environ;

namespace kpool::daemon {

std::vector<std::string> kernel_environment(const jupyter::kernelspec& spec,
                                            const std::string& instance) {
    std::map<std::string, std::string> env;
    for (char** e = environ; *e != nullptr; ++e) {
        std::string_view entry(*e);
        const auto eq = entry.find('=');
        if (eq != std::string_view::npos) {
            env[std::string(entry.substr(0, eq))] = std::string(entry.substr(eq + 1));
        }
    }
    const auto inherited = env;
    for (const auto& [name, value] : spec.env) {
        env[name] = jupyter::expand_env_value(value, inherited);
    }
    // As jupyter_client's launcher does: the kernel knows its parent, and ipykernel then
    // installs its interrupt handling and exits if the daemon disappears.
    env["JPY_PARENT_PID"] = std::to_string(::getpid());
    // Marks the kernel and whatever it starts as this run's, for the cleanup after a crash.
    env[instance_env_var] = instance;
    std::vector<std::string> out;
    for (const auto& [name, value] : env) {
        out.push_back(name + "=" + value);
    }
    return out;
}

} // namespace kpool::daemon
