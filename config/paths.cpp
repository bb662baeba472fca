// Default locations, shared by the daemon and the clients.
#include "config/paths.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

namespace kpool::config {

std::string default_runtime_dir() {
    struct stat st {};
    if (const char* xdg = std::getenv("XDG_RUNTIME_DIR");
        xdg != nullptr && *xdg == '/' && ::stat(xdg, &st) == 0 && S_ISDIR(st.st_mode)) {
        return std::string(xdg) + "/kpool";
    }
    if (geteuid() == 0) {
        return "/run/kpool";
    }
    return "/tmp/kpool-" + std::to_string(geteuid());
}

std::string default_state_dir() {
    if (const char* systemd = std::getenv("STATE_DIRECTORY");
        systemd != nullptr && *systemd == '/') {
        const std::string first(systemd);
        return first.substr(0, first.find(':')); // a list when the unit names several
    }
    if (geteuid() == 0) {
        return "/var/lib/kpool";
    }
    if (const char* xdg = std::getenv("XDG_STATE_HOME"); xdg != nullptr && *xdg == '/') {
        return std::string(xdg) + "/kpool";
    }
    if (const char* home = std::getenv("HOME"); home != nullptr && *home == '/') {
        return std::string(home) + "/.local/state/kpool";
    }
    return "/tmp/kpool-" + std::to_string(geteuid()) + "-state";
}

std::string default_control_endpoint(const std::string& runtime_dir) {
    return "ipc://" + runtime_dir + "/control";
}

} // namespace kpool::config
