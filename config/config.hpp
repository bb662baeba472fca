// kpoold's configuration: the TOML schema, its defaults and its validation.
//
// Every problem is reported as one "file:line:col: message" diagnostic pointing at the offending
// key or value: syntax errors, unknown keys, wrong types and impossible values alike.
#pragma once

#include "protocol/result.hpp"

#include <string>
#include <string_view>
#include <vector>

namespace kpool::config {

struct pool_config {
    std::string name;             // what clients ask for
    std::string kernelspec;       // defaults to name
    int size = 2;                 // warm kernels kept ready
    int max_starting = 2;         // kernels starting at once, so refills do not starve the host
    double ready_timeout_s = 60;  // start to kernel_info_reply, else killed and replaced
    double lease_s = 3600;        // default lease of an acquired kernel; 0 means no limit
    double shutdown_grace_s = 2;  // shutdown_request to SIGTERM, and SIGTERM to SIGKILL
    std::string transport = "tcp";
    std::string ip = "127.0.0.1"; // tcp only; ipc sockets live in the runtime directory
    // Code applying a client's cwd/env in the kernel ("{context}" = JSON string literal);
    // empty: kpool's built-in snippet for the kernel's language, if any.
    std::string context_snippet;
};

struct daemon_config {
    std::string control;     // ZeroMQ endpoint of the control ROUTER socket
    std::string runtime_dir; // connection files, ipc sockets
    std::string log_level = "info";
    int max_kernels = 64;    // warm + starting + leased + stopping, all pools together
};

struct config {
    daemon_config daemon;
    std::vector<pool_config> pools;

    const pool_config* find_pool(std::string_view name) const;
};

// Parses and validates. `source_name` is the path shown in diagnostics.
// The error's message is the whole diagnostic: "file:line:col: message".
result<config> parse_config(std::string_view toml_text, const std::string& source_name);

// Reads and parses a file; an unreadable file is a diagnostic too.
result<config> load_config_file(const std::string& path);

// The embedded default config (config/default.toml), with paths resolved for this user.
config default_config();

} // namespace kpool::config
