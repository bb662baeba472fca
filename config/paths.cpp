// Default locations, shared by the daemon and the clients.
#include "config/paths.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>

namespace kpool::config {

std::string default_runtime_dir() {
    struct stat st{};
    if (const char* xdg = std::getenv("XDG_RUNTIME_DIR");
        xdg != nullptr && *xdg == '/' && ::stat(xdg, &st) == 0 && S_ISDIR(st.st_mode)) {
        return std::string(xdg) + "/kpool";
    }
    if (geteuid() == 0) {
        return "/run/kpool";
    }
    return "/tmp/kpool-" + std::to_string(geteuid());
}

std::string default_control_endpoint(const std::string& runtime_dir) {
    return "ipc://" + runtime_dir + "/control";
}

} // namespace kpool::config
