// TOML -> validated config, with file:line:col diagnostics for every kind of mistake: what each
// section holds and how its keys relate (the typed readers are config/toml_read.hpp's).
#include "config/config.hpp"

#include "config/paths.hpp"
#include "config/toml_read.hpp"
#include "kpool/default_config.hpp"

#include <sys/un.h>

#include <toml++/toml.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <fstream>
#include <initializer_list>
#include <sstream>

namespace kpool::config {
namespace {

using namespace detail;

// kernel_ports = "auto" | "ephemeral" | "FIRST-LAST" (room for at least one kernel's five).
void read_kernel_ports(const toml::table& table, daemon_config& d) {
    const std::string text = read_string(table, "kernel_ports", "auto");
    if (text == "auto" || text == "ephemeral") {
        d.kernel_ports = text == "auto" ? kernel_port_source::automatic : kernel_port_source::ephemeral;
        return;
    }
    unsigned first = 0;
    unsigned last = 0;
    const auto dash = text.find('-');
    const auto number = [](std::string_view digits, unsigned& out) {
        const char* end = digits.data() + digits.size();
        const auto [at, ec] = std::from_chars(digits.data(), end, out);
        return !digits.empty() && ec == std::errc() && at == end;
    };
    const bool parsed = dash != std::string::npos &&
                        number(std::string_view(text).substr(0, dash), first) &&
                        number(std::string_view(text).substr(dash + 1), last);
    check_value(table, "kernel_ports", [&] { return parsed; },
                "'kernel_ports' must be \"auto\", \"ephemeral\" or a range such as "
                "\"61000-65535\", not '" + text + "'");
    check_value(table, "kernel_ports",
                [&] { return first >= 1024 && last <= 65535 && first <= last && last - first >= 4; },
                "'kernel_ports' must lie within 1024-65535 and hold at least 5 ports (one "
                "kernel's), not '" + text + "'");
    d.kernel_ports = kernel_port_source::range;
    d.kernel_ports_first = static_cast<std::uint16_t>(first);
    d.kernel_ports_last = static_cast<std::uint16_t>(last);
}

daemon_config read_daemon(const toml::table& root) {
    daemon_config d;
    const toml::table* t = sub_table(root, "daemon");
    const toml::table empty;
    const toml::table& table = t != nullptr ? *t : empty;
    check_known_keys(table, "[daemon]",
                     {"control", "runtime_dir", "log_level", "max_kernels", "allowed_uids",
                      "allowed_gids", "curve_secret_key_file", "curve_allowed_keys", "metrics",
                      "background_priority", "background_limit_s", "refill_delay_s", "advertise_host",
                      "kernel_ports", "state_dir"});

    d.runtime_dir = read_string(table, "runtime_dir", default_runtime_dir());
    check_value(table, "runtime_dir", [&] { return !d.runtime_dir.empty() && d.runtime_dir[0] == '/'; },
                "'runtime_dir' must be an absolute path");
    d.state_dir = read_string(table, "state_dir", default_state_dir());
    check_value(table, "state_dir", [&] { return !d.state_dir.empty() && d.state_dir[0] == '/'; },
                "'state_dir' must be an absolute path");
    d.control = read_string(table, "control", default_control_endpoint(d.runtime_dir));
    const std::string_view ipc = "ipc://";
    check_value(table, "control", [&] { return d.control.starts_with(ipc) || d.is_tcp(); },
                "'control' must be an ipc:// or tcp:// endpoint");
    check_value(table, "control",
                [&] {
                    return !d.control.starts_with(ipc) ||
                           d.control.size() - ipc.size() < sizeof(sockaddr_un::sun_path);
                },
                "'control' ipc path is longer than a Unix socket path may be (107 bytes)");
    d.allowed_uids = read_ids(table, "allowed_uids");
    d.allowed_gids = read_ids(table, "allowed_gids");
    d.curve_secret_key_file = read_string(table, "curve_secret_key_file", "");
    d.curve_allowed_keys = read_keys(table, "curve_allowed_keys");
    check_value(table, "control",
                [&] { return !d.is_tcp() || (!d.curve_secret_key_file.empty() &&
                                             !d.curve_allowed_keys.empty()); },
                "a tcp:// control endpoint needs CURVE: set 'curve_secret_key_file' and "
                "'curve_allowed_keys' (anyone who reaches the port could take kernels otherwise)");
    for (std::string_view key : {"allowed_uids", "allowed_gids"}) {
        check_value(table, key, [&] { return !d.is_tcp(); },
                    "'" + std::string(key) + "' applies to ipc:// endpoints only; tcp clients "
                    "are authenticated by 'curve_allowed_keys'");
    }
    for (std::string_view key : {"curve_secret_key_file", "curve_allowed_keys"}) {
        check_value(table, key, [&] { return d.is_tcp(); },
                    "'" + std::string(key) + "' applies to tcp:// endpoints only");
    }
    check_value(table, "curve_secret_key_file",
                [&] { return d.curve_secret_key_file.starts_with('/'); },
                "'curve_secret_key_file' must be an absolute path");
    d.log_level = read_string(table, "log_level", d.log_level);
    const std::initializer_list<std::string_view> levels = {"trace", "debug", "info", "warn",
                                                            "error", "critical", "off"};
    check_value(table, "log_level",
                [&] { return std::find(levels.begin(), levels.end(), d.log_level) != levels.end(); },
                "'log_level' must be one of trace, debug, info, warn, error, critical, off");
    d.max_kernels = read_int(table, "max_kernels", d.max_kernels, 1, 4096);
    d.background_priority = read_bool(table, "background_priority", d.background_priority);
    d.background_limit_s =
        read_seconds(table, "background_limit_s", d.background_limit_s, 0, 3600, false);
    d.refill_delay_s = read_optional_seconds(table, "refill_delay_s", 0, 10);
    d.advertise_host = read_host(table, "advertise_host", "");
    check_value(table, "advertise_host",
                [&] { return d.advertise_host.empty() || valid_host_name(d.advertise_host); },
                "'advertise_host' must be a host name or an address, not '" + d.advertise_host + "'");
    read_kernel_ports(table, d);
    d.metrics = read_string(table, "metrics", "");
    check_value(table, "metrics", [&] { return d.metrics.empty() || valid_host_port(d.metrics); },
                "'metrics' must be HOST:PORT, e.g. \"127.0.0.1:9464\"");
    return d;
}

// A Python module's dotted name: identifiers (ASCII here) joined by dots.
bool valid_module_name(const std::string& name) {
    bool start = true;
    for (const char c : name) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '.') {
            if (start) {
                return false;
            }
            start = true;
        } else if (std::isalpha(u) || c == '_' || (!start && std::isdigit(u))) {
            start = false;
        } else {
            return false;
        }
    }
    return !start;
}

// isolation and [pools.NAME.sandbox].
void read_isolation(const std::string& name, const toml::table& table, pool_config& p) {
    const std::string isolation = read_string(table, "isolation", "none");
    check_value(table, "isolation", [&] { return isolation == "none" || isolation == "sandbox"; },
                "'isolation' must be \"none\" or \"sandbox\"");
    p.isolation = isolation == "sandbox" ? isolation_kind::sandbox : isolation_kind::none;
    const toml::table* sandbox = sub_table(table, "sandbox");
    if (sandbox == nullptr) {
        return;
    }
    if (p.isolation != isolation_kind::sandbox) {
        fail(table.get("sandbox")->source(), "[pools." + name + ".sandbox] applies to isolation = \"sandbox\" only");
    }
    check_known_keys(*sandbox, "[pools." + name + ".sandbox]", {"readable", "writable", "roots", "network", "user"});
    p.sandbox.readable = read_paths(*sandbox, "readable");
    p.sandbox.writable = read_paths(*sandbox, "writable");
    p.sandbox.roots = read_paths(*sandbox, "roots");
    p.sandbox.network = read_bool(*sandbox, "network", p.sandbox.network);
    p.sandbox.user = read_string(*sandbox, "user", p.sandbox.user);
    check_value(*sandbox, "user", [&] { return !p.sandbox.user.empty() && p.sandbox.user != "root" && p.sandbox.user != "0"; },
                "'user' names who sandboxed kernels run as when kpoold is root: never root");
    if (!p.sandbox.network) {
        // The kernel's 127.0.0.1 is its own: kpoold reaches its channels over ipc sockets.
        check_value(table, "transport", [&] { return p.transport == "ipc"; },
                    "network = false needs transport = \"ipc\" (the kernel's loopback is its own)");
        p.transport = "ipc";
    }
}

pool_config read_pool(const std::string& name, const toml::table& table, const daemon_config& d) {
    check_known_keys(table, "[pools." + name + "]",
                     {"kernelspec", "size", "min", "max", "max_starting", "ready_timeout_s", "lease_s",
                      "shutdown_grace_s", "transport", "ip", "context_snippet", "heartbeat_s",
                      "heartbeat_timeout_s", "limits", "startup_code", "prime", "launcher", "python",
                      "refill_delay_s", "preload", "preload_max_mb", "prefault", "isolation",
                      "sandbox"});
    pool_config p;
    p.name = name;
    p.kernelspec = read_string(table, "kernelspec", name);
    const toml::node* spec_node = table.get("kernelspec");
    p.kernelspec_at = position_text(spec_node != nullptr ? spec_node->source() : table.source());
    check_value(table, "kernelspec", [&] { return valid_pool_name(p.kernelspec); },
                "'kernelspec' must be a kernelspec name (letters, digits, '-', '_', '.')");
    if (const toml::node* size = table.get("size"); size != nullptr && size->is_string()) {
        if (size->as_string()->get() != "auto") {
            fail(size->source(), "'size' must be an integer or \"auto\"");
        }
        p.auto_size = true;
        p.min_size = read_int(table, "min", 0, 0, d.max_kernels);
        if (table.get("max") == nullptr) {
            fail(size->source(), "size = \"auto\" needs 'max', the most warm kernels to keep");
        }
        p.max_size = read_int(table, "max", 0, 1, d.max_kernels);
        check_value(table, "max", [&] { return p.max_size >= p.min_size; },
                    "'max' must be at least 'min'");
        p.size = p.min_size;
    } else {
        p.size = read_int(table, "size", p.size, 0, d.max_kernels);
        for (std::string_view key : {"min", "max"}) {
            check_value(table, key, [] { return false; },
                        "'" + std::string(key) + "' applies to size = \"auto\" only");
        }
    }
    p.max_starting = read_int(table, "max_starting", p.max_starting, 1, 64);
    p.ready_timeout_s = read_seconds(table, "ready_timeout_s", p.ready_timeout_s, 0, 3600, true);
    p.lease_s = read_seconds(table, "lease_s", p.lease_s, 0, 31536000, false);
    p.shutdown_grace_s = read_seconds(table, "shutdown_grace_s", p.shutdown_grace_s, 0, 60, false);
    p.transport = read_string(table, "transport", p.transport);
    check_value(table, "transport", [&] { return p.transport == "tcp" || p.transport == "ipc"; },
                "'transport' must be \"tcp\" or \"ipc\"");
    p.ip = read_host(table, "ip", p.ip);
    check_value(table, "ip", [&] { return valid_ip(p.ip); },
                "'ip' must be an IPv4 or IPv6 address, not '" + p.ip + "'");
    p.context_snippet = read_string(table, "context_snippet", "");
    check_value(table, "context_snippet",
                [&] {
                    return p.context_snippet.empty() ||
                           p.context_snippet.find("{context}") != std::string::npos;
                },
                "'context_snippet' must contain {context}, where the cwd and env go");
    p.python = read_string(table, "python", p.python);
    check_value(table, "python", [&] { return p.python.starts_with('/'); },
                "'python' must be an absolute path to an interpreter, e.g. \"/usr/bin/python3\"");
    p.startup_code = read_string(table, "startup_code", "");
    const std::string launcher = read_string(table, "launcher", to_string(p.launcher));
    const auto kind = launcher_kind_named(launcher);
    check_value(table, "launcher", [&] { return kind.has_value(); },
                "'launcher' must be \"auto\", \"spawn\" or \"fork\"");
    p.launcher = kind.value_or(launcher_kind::automatic);
    p.prime = read_bool(table, "prime", p.prime);
    if (const toml::node* preload = table.get("preload"); preload != nullptr && preload->is_array()) {
        p.preload = preload_mode::list;
        p.preload_modules = read_names(table, "preload");
        for (const toml::node& item : *preload->as_array()) {
            const std::string& module = item.as_string()->get();
            if (!valid_module_name(module)) {
                fail(item.source(), "'preload' lists module names (\"pandas\", \"matplotlib.pyplot\"), not \"" +
                                        module + "\"");
            }
        }
    } else {
        const std::string mode = read_string(table, "preload", "learn");
        check_value(table, "preload", [&] { return mode == "learn" || mode == "off"; },
                    "'preload' must be \"learn\", \"off\" or a list of module names");
        p.preload = mode == "off" ? preload_mode::off : preload_mode::learn;
    }
    p.preload_max_mb = read_int(table, "preload_max_mb", p.preload_max_mb, 16, 1 << 20);
    const auto prefault = prefault_mode_named(read_string(table, "prefault", to_string(p.prefault)));
    check_value(table, "prefault", [&] { return prefault.has_value(); },
                "'prefault' must be \"learn\", \"start\" or \"off\"");
    p.prefault = prefault.value_or(prefault_mode::learn);
    p.refill_delay_s = read_optional_seconds(table, "refill_delay_s", 0, 10);
    p.heartbeat_s = read_seconds(table, "heartbeat_s", p.heartbeat_s, 0, 86400, false);
    p.heartbeat_timeout_s =
        read_seconds(table, "heartbeat_timeout_s", p.heartbeat_timeout_s, 0, 3600, true);
    if (const toml::table* limits = sub_table(table, "limits")) {
        check_known_keys(*limits, "[pools." + name + ".limits]",
                         {"address_space_mb", "cpu_seconds", "open_files", "memory_mb", "processes"});
        p.limits.address_space_mb = read_int(*limits, "address_space_mb", 0, 64, 1 << 30);
        p.limits.cpu_seconds = read_int(*limits, "cpu_seconds", 0, 1, 1 << 30);
        p.limits.open_files = read_int(*limits, "open_files", 0, 16, 1 << 20);
        p.limits.memory_mb = read_int(*limits, "memory_mb", 0, 32, 1 << 30);
        p.limits.processes = read_int(*limits, "processes", 0, 16, 1 << 22);
    }
    read_isolation(name, table, p);
    return p;
}

serve_config read_serve(const toml::table& root) {
    serve_config s;
    const toml::table* t = sub_table(root, "serve");
    if (t == nullptr) {
        return s;
    }
    const toml::table& table = *t;
    check_known_keys(table, "[serve]",
                     {"listen", "root", "save_dir", "kernel", "token_file", "require_token", "allow_hosts",
                      "cert_file", "key_file",
                      "queue_timeout_s", "max_queue", "spares", "cells_ahead", "max_body", "max_header", "max_connections", "resolve_every_s", "stop_grace_s", "cull_idle_timeout_s",
                      "cull_interval_s", "cull_connected", "cull_busy", "kernel_lease_s", "env_whitelist",
                      "max_kernels", "allow_origin", "allow_credentials", "allow_headers", "allow_methods",
                      "expose_headers", "max_age"});
    s.listen = read_string(table, "listen", s.listen);
    check_value(table, "listen", [&] { return valid_host_port(s.listen) && s.listen.front() != ':'; },
                "'listen' must be HOST:PORT with an IP address, e.g. \"127.0.0.1:8890\"");
    for (auto [key, field] : {std::pair{"root", &s.root}, std::pair{"save_dir", &s.save_dir},
                              std::pair{"token_file", &s.token_file}, std::pair{"cert_file", &s.cert_file},
                              std::pair{"key_file", &s.key_file}}) {
        *field = read_string(table, key, "");
        check_value(table, key, [&] { return field->empty() || field->starts_with("/"); },
                    "'" + std::string(key) + "' must be an absolute path");
    }
    s.require_token = read_bool(table, "require_token", s.require_token);
    s.allow_hosts = read_names(table, "allow_hosts");
    s.kernel = read_string(table, "kernel", s.kernel);
    check_value(table, "kernel", [&] { return valid_pool_name(s.kernel); },
                "'kernel' must be a pool name (letters, digits, '-', '_', '.')");
    if (s.cert_file.empty() != s.key_file.empty()) {
        fail(table.get(s.cert_file.empty() ? "key_file" : "cert_file")->source(),
             "TLS needs both 'cert_file' and 'key_file'");
    }
    s.queue_timeout_s = read_seconds(table, "queue_timeout_s", s.queue_timeout_s, 0, 3600, true);
    s.max_queue = read_int(table, "max_queue", s.max_queue, 1, 100000);
    s.spares = read_int(table, "spares", s.spares, 0, 64);
    s.cells_ahead = read_int(table, "cells_ahead", s.cells_ahead, 1, 64);
    s.max_body = read_int(table, "max_body", s.max_body, 1024, 1 << 30);
    s.max_header = read_int(table, "max_header", s.max_header, 1024, 1 << 20);
    s.max_connections = read_int(table, "max_connections", s.max_connections, 1, 1000000);
    s.resolve_every_s = read_seconds(table, "resolve_every_s", s.resolve_every_s, 0.1, 86400, false);
    s.stop_grace_s = read_seconds(table, "stop_grace_s", s.stop_grace_s, 0, 3600, true);
    s.cull_idle_timeout_s = read_seconds(table, "cull_idle_timeout_s", s.cull_idle_timeout_s, 0, 604800, false);
    s.cull_interval_s = read_seconds(table, "cull_interval_s", s.cull_interval_s, 1, 86400, false);
    s.cull_connected = read_bool(table, "cull_connected", s.cull_connected);
    s.cull_busy = read_bool(table, "cull_busy", s.cull_busy);
    s.kernel_lease_s = read_seconds(table, "kernel_lease_s", s.kernel_lease_s, 3, 86400, false);
    s.env_whitelist = read_names(table, "env_whitelist");
    s.max_kernels = read_int(table, "max_kernels", s.max_kernels, 0, 100000);
    for (auto [key, field] : {std::pair{"allow_origin", &s.allow_origin}, std::pair{"allow_credentials", &s.allow_credentials},
                              std::pair{"allow_headers", &s.allow_headers}, std::pair{"allow_methods", &s.allow_methods},
                              std::pair{"expose_headers", &s.expose_headers}, std::pair{"max_age", &s.max_age}}) {
        *field = read_string(table, key, "");
    }
    return s;
}

config read_config(const toml::table& root) {
    check_known_keys(root, "the top level", {"daemon", "pools", "serve"});
    config cfg;
    cfg.daemon = read_daemon(root);
    cfg.serve = read_serve(root);
    const toml::table* pools = sub_table(root, "pools");
    if (pools == nullptr || pools->empty()) {
        fail(pools != nullptr ? pools->source() : root.source(),
             "no pools configured: add a [pools.NAME] table");
    }
    int total_size = 0;
    for (auto&& [key, node] : *pools) {
        const std::string name(key.str());
        if (!valid_pool_name(name)) {
            fail(key.source(), "pool name '" + name + "' may hold only letters, digits, '-', '_', '.'");
        }
        if (!node.is_table()) {
            fail(node.source(), "'pools." + name + "' must be a table, not " + type_name(node));
        }
        cfg.pools.push_back(read_pool(name, *node.as_table(), cfg.daemon));
        total_size += cfg.pools.back().size;
        if (total_size > cfg.daemon.max_kernels) {
            const toml::node* size = node.as_table()->get("size");
            fail(size != nullptr ? size->source() : key.source(),
                 "pool sizes add up to " + std::to_string(total_size) +
                     ", more than [daemon] max_kernels = " + std::to_string(cfg.daemon.max_kernels));
        }
    }
    return cfg;
}

std::string diagnostic(const std::string& source, const toml::source_position& where,
                       std::string_view message) {
    std::ostringstream out;
    out << source << ':' << std::max<toml::source_index>(where.line, 1) << ':'
        << std::max<toml::source_index>(where.column, 1) << ": " << message;
    return out.str();
}

} // namespace

const pool_config* config::find_pool(std::string_view name) const {
    auto it = std::find_if(pools.begin(), pools.end(), [&](const auto& p) { return p.name == name; });
    return it != pools.end() ? &*it : nullptr;
}

result<config> parse_config(std::string_view toml_text, const std::string& source_name) {
    try {
        toml::table root = toml::parse(toml_text, source_name);
        return read_config(root);
    } catch (const toml::parse_error& e) {
        return error{errc::bad_request, diagnostic(source_name, e.source().begin, e.description())};
    } catch (const config_failure& f) {
        return error{errc::bad_request, diagnostic(source_name, f.where, f.message)};
    }
}

result<config> load_config_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        return error{errc::bad_request, path + ":1:1: cannot read the file"};
    }
    std::ostringstream text;
    text << in.rdbuf();
    return parse_config(text.str(), path);
}

config default_config() {
    auto cfg = parse_config(default_config_text, "<embedded default config>");
    // The embedded text is ours and tested; failing here is a build mistake, not user input.
    if (!cfg) {
        throw std::logic_error(cfg.err().message);
    }
    return std::move(cfg).value();
}

const char* to_string(preload_mode mode) {
    switch (mode) {
    case preload_mode::learn:
        return "learn";
    case preload_mode::off:
        return "off";
    case preload_mode::list:
        return "list";
    }
    return "learn";
}

const char* to_string(prefault_mode mode) {
    switch (mode) {
    case prefault_mode::learn:
        return "learn";
    case prefault_mode::start:
        return "start";
    case prefault_mode::off:
        return "off";
    }
    return "learn";
}

std::optional<prefault_mode> prefault_mode_named(std::string_view name) {
    for (prefault_mode mode : {prefault_mode::learn, prefault_mode::start, prefault_mode::off}) {
        if (name == to_string(mode)) {
            return mode;
        }
    }
    return std::nullopt;
}

const char* to_string(isolation_kind kind) noexcept {
    return kind == isolation_kind::sandbox ? "sandbox" : "none";
}

const char* to_string(launcher_kind kind) noexcept {
    switch (kind) {
    case launcher_kind::automatic:
        return "auto";
    case launcher_kind::spawn:
        return "spawn";
    case launcher_kind::fork:
        return "fork";
    }
    return "?";
}

std::optional<launcher_kind> launcher_kind_named(std::string_view name) noexcept {
    if (name == "auto") {
        return launcher_kind::automatic;
    }
    if (name == "spawn") {
        return launcher_kind::spawn;
    }
    if (name == "fork") {
        return launcher_kind::fork;
    }
    return std::nullopt;
}

} // namespace kpool::config
