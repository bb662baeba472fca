// What `kpool serve` runs with: where it listens, which kpoolds it fronts, who may call it, and
// its back-pressure limits.
#pragma once

#include "client/control_client.hpp"
#include "config/config.hpp"
#include "serve/front_door.hpp"

#include <chrono>
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace kpool::serve {

using gateway_options = config::gateway_settings;

// [serve] and the flags (config::serve_config), and what only the command line and the running
// server know.
struct serve_options : config::serve_config {
    std::vector<std::string> endpoints; // kpoolds' control endpoints, tried in turn on failure
    // The setting `endpoints` came from; with a dns: entry it is resolved again every
    // resolve_every (serve/endpoint_resolver.hpp).
    std::string endpoint_setting;
    client::curve_keys keys; // for tcp:// endpoints
    // Callers must send `Authorization: token TOKEN` (or `Bearer TOKEN`): token_file's first
    // line, or $KPOOL_SERVE_TOKEN. Empty: kpool serve makes one and writes it to
    // token_dir/serve-PORT.token (0600), unless no_token.
    std::string token;
    // Where a token kpool serve made is written for the same user's clients (a 0700 directory).
    std::string token_dir;
};

// Whether `host` is a loopback address (127.0.0.0/8, ::1).
bool is_loopback(const std::string& host);

} // namespace kpool::serve
