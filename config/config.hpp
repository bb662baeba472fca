// kpoold's configuration: the TOML schema, its defaults and its validation.
//
// Every problem is reported as one "file:line:col: message" diagnostic pointing at the offending
// key or value: syntax errors, unknown keys, wrong types and impossible values alike.
#pragma once

#include "protocol/result.hpp"

#include <array>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kpool::config {

// An enum's names as the config writes them, in the enum's order: enum_names<E>::names.
template <class E>
struct enum_names;

template <class E>
const char* to_string(E value) noexcept {
    return enum_names<E>::names[static_cast<std::size_t>(value)].data();
}
template <class E>
std::optional<E> named(std::string_view name) noexcept {
    for (std::size_t i = 0; i < enum_names<E>::names.size(); ++i) {
        if (enum_names<E>::names[i] == name) {
            return static_cast<E>(i);
        }
    }
    return std::nullopt;
}

// How a pool's kernels come to exist (daemon/process/launcher_registry.hpp).
enum class launcher_kind { automatic, spawn, fork };
template <>
struct enum_names<launcher_kind> {
    static constexpr std::array<std::string_view, 3> names{"auto", "spawn", "fork"};
};

// setrlimit values applied to each kernel at spawn; 0 leaves the daemon's own limit.
struct kernel_limits {
    int address_space_mb = 0; // RLIMIT_AS
    int cpu_seconds = 0;      // RLIMIT_CPU: the kernel is killed after this much CPU time
    int open_files = 0;       // RLIMIT_NOFILE
    // For a kernel and everything it starts, together (daemon/process/kernel_cgroups.hpp: a
    // cgroup where kpoold can make one, else what holds instead, as status says).
    int memory_mb = 0; // out of memory beyond this: the process using most is killed
    int processes = 0; // tasks (threads count) at once
    bool operator==(const kernel_limits&) const = default;
};

// isolation = "sandbox": each kernel in namespaces of its own (daemon/sandbox/, docs/security.md).
enum class isolation_kind { none, sandbox };
template <>
struct enum_names<isolation_kind> {
    static constexpr std::array<std::string_view, 2> names{"none", "sandbox"};
};

// [pools.NAME.sandbox]: what a sandboxed kernel sees beyond the system's read-only directories.
struct sandbox_config {
    std::vector<std::string> readable; // read-only, at their own paths
    std::vector<std::string> writable; // read-write
    // Where an acquire's cwd may be (each bound writable): another cwd is refused.
    std::vector<std::string> roots;
    bool network = true;         // false: only its own loopback (channels over ipc)
    std::string user = "nobody"; // kpoold as root: who kernels run as (never root)
    bool operator==(const sandbox_config&) const = default;
};

enum class preload_mode { learn, off, list };
template <>
struct enum_names<preload_mode> {
    static constexpr std::array<std::string_view, 3> names{"learn", "off", "list"};
};
enum class prefault_mode { learn, start, off };
template <>
struct enum_names<prefault_mode> {
    static constexpr std::array<std::string_view, 3> names{"learn", "start", "off"};
};

struct pool_config {
    std::string name;          // what clients ask for
    std::string kernelspec;    // defaults to name
    std::string kernelspec_at; // "file:line:col" of that choice, for problems found later
    // The interpreter a kernelspec whose argv[0] is "python" or "python3" runs (see
    // resolve_kernel_program in jupyter/kernelspec.hpp).
    std::string python = "/usr/bin/python3";
    int size = 2; // warm kernels kept ready (auto: the starting size, = min)
    // size = "auto": the daemon sizes the pool between min and max from the arrival rate and
    // the measured time to warm (daemon/core/autosize.hpp).
    bool auto_size = false;
    int min_size = 0;
    int max_size = 0;
    int max_starting = 2;        // kernels starting at once, so refills do not starve the host
    double ready_timeout_s = 60; // start to kernel_info_reply, else killed and replaced
    double lease_s = 3600;       // default lease of an acquired kernel; 0 means no limit
    double shutdown_grace_s = 2; // shutdown_request to SIGTERM, and SIGTERM to SIGKILL
    std::string transport = "tcp";
    std::string ip = "127.0.0.1"; // tcp only; ipc sockets: see daemon/process/ipc_socket_dirs.hpp
    // Code applying a client's cwd/env in the kernel ("{context}" = JSON string literal);
    // empty: kpool's built-in snippet for the kernel's language, if any.
    std::string context_snippet;
    // spawn: a new interpreter per kernel; fork: forked from a zygote that imported ipykernel
    // (and startup_code's imports) once and pre-built its app and shell, ipykernel only;
    // auto ("auto", the default): fork for a kernelspec that runs `PYTHON -m ipykernel_launcher`,
    // spawn for any other (launcher_registry.hpp decides and says why in status).
    launcher_kind launcher = launcher_kind::automatic;
    // Run in each kernel before it counts as warm (e.g. "import numpy, pandas"), silently: no
    // output, no history, no execution count. An error is a failed start.
    std::string startup_code;
    // Run the priming executes of the kernel's language (languages/<name>.cpp) before it
    // counts as warm, so that a user's first cell is as fast as the next ones.
    bool prime = true;
    // What a fork pool's zygote pre-imports beyond ipykernel (daemon/service/import_learning.hpp):
    // learn (the default: the modules most of its recent kernels used), off, or a fixed list.
    preload_mode preload = preload_mode::learn;
    std::vector<std::string> preload_modules; // preload_mode::list
    int preload_max_mb = 1024;                // the most pre-importing may add to the zygote
    // Which of a fork zygote's pages each kernel makes its own as it starts, rather than one
    // fault at a time while its user waits (daemon/process/zygote.py's HotPageLearner): learn
    // (the default: those kernels write as they start and those most sampled kernels wrote over
    // their whole life), start (only the former), or off (none: the least memory per kernel).
    prefault_mode prefault = prefault_mode::learn;
    // This pool's own refill_delay_s (see daemon_config's), if set.
    std::optional<double> refill_delay_s;
    // Idle warm kernels are sent a kernel_info_request every heartbeat_s (0: never); one that
    // does not answer within heartbeat_timeout_s is killed and replaced.
    double heartbeat_s = 10;
    double heartbeat_timeout_s = 5;
    kernel_limits limits;
    isolation_kind isolation = isolation_kind::none;
    sandbox_config sandbox;
    bool operator==(const pool_config&) const = default;
};

enum class kernel_port_source { automatic, ephemeral, range };

struct daemon_config {
    std::string control;     // ZeroMQ endpoint of the control ROUTER socket
    std::string runtime_dir; // connection files, ipc sockets
    std::string state_dir;   // what survives a restart: the modules pools learned (paths.hpp)
    std::string log_level = "info";
    int max_kernels = 64; // warm + starting + leased + stopping, all pools together
    // Starting and stopping kernels run at SCHED_IDLE, warm ones at normal priority
    // (daemon/process/cpu_priority.hpp), where the daemon may do so.
    bool background_priority = true;
    // A kernel still starting after this long at SCHED_IDLE gets normal priority: on a host
    // that is never idle, refill would otherwise wait forever. 0: no limit.
    double background_limit_s = 5;
    // A refill after an acquire starts this long after it (after the first of a burst) while the
    // pool still has a warm kernel, so that its fork and start-up work does not take the CPU
    // from the code the client runs first. 0: at once. Every pool's unless it sets its own;
    // unset: a default by launcher (daemon/core/refill_delay.hpp).
    std::optional<double> refill_delay_s;
    // ipc: peers allowed besides the daemon's own uid (checked with SO_PEERCRED through ZAP).
    // When either list is set the socket file is made connectable by everyone and ZAP decides.
    std::vector<unsigned> allowed_uids;
    std::vector<unsigned> allowed_gids;
    // tcp: required. The daemon's CURVE secret key (a file holding its Z85 text, mode 0600)
    // and the Z85 public keys of the clients allowed in.
    std::string curve_secret_key_file;
    std::vector<std::string> curve_allowed_keys;
    // host:port of the Prometheus endpoint; empty: none.
    std::string metrics;
    // The host written into the connection info of tcp kernels handed out (clients on other
    // hosts connect there); empty: each pool's ip. "${NAME}": the environment variable NAME.
    std::string advertise_host;
    // Where tcp kernels' ports come from (daemon/process/port_registry.hpp): "auto" (the
    // default: above the OS's ephemeral range, which jupyter_client and outgoing connections
    // draw from, when that leaves room), "ephemeral" (the OS's choice, as jupyter_client) or a
    // range "FIRST-LAST" of ours.
    kernel_port_source kernel_ports = kernel_port_source::automatic;
    std::uint16_t kernel_ports_first = 0; // a range only
    std::uint16_t kernel_ports_last = 0;

    bool is_tcp() const { return control.starts_with("tcp://"); }
    bool restricts_ipc_peers() const { return !allowed_uids.empty() || !allowed_gids.empty(); }
};

// [serve]'s Kernel Gateway API settings, named as Kernel Gateway's flags are.
struct gateway_settings {
    // A kernel idle (no message either way) this long is shut down; 0: never.
    std::chrono::seconds cull_idle_timeout{0};
    std::chrono::seconds cull_interval{300};
    bool cull_connected = false; // cull kernels with a websocket connected too
    bool cull_busy = false;      // cull kernels that are busy too
    // The lease each kernel is held under, renewed every third of it while kpool serve holds
    // the kernel: a kpool serve that dies leaves its kernels running this long at most.
    std::chrono::seconds kernel_lease{120};
    // Variables of a start request's env passed to the kernel besides KERNEL_*.
    std::vector<std::string> env_whitelist;
    std::size_t max_kernels = 0; // held at once; 0: no limit beyond the pools'
    bool operator==(const gateway_settings&) const = default;
};

// The CORS headers an allowed origin's answers get besides Allow-Origin, when set.
struct cors_settings {
    std::string allow_credentials;
    std::string allow_headers;
    std::string allow_methods;
    std::string expose_headers;
    std::string max_age;
    bool operator==(const cors_settings&) const = default;
};

// [serve]: `kpool serve --config FILE` (docs/serve.md), read straight into what kpool serve runs
// with (serve::serve_options adds what only the command line and the running server know); its
// flags override each key.
struct serve_config {
    std::string host = "127.0.0.1"; // listen = "HOST:PORT"
    int port = 8890;
    std::string root;     // absolute; the notebooks /v1/run/{path} may run; empty: none
    std::string save_dir; // absolute; each executed notebook kept as SAVE_DIR/REQUEST_ID.ipynb
    std::string default_kernel = "python3"; // kernel: the pool a request without "kernel" runs on
    std::string token_file; // absolute; callers must send its first line as the token
    // No token at all (require_token = false, --no-token): loopback only, and then the Host must
    // be a loopback name.
    bool no_token = false;
    // Host names accepted besides loopback's while no token is required (DNS rebinding), or "*".
    std::vector<std::string> allow_hosts;
    // Web page origins that may call (CORS) besides the server's own: exact origins, or "*".
    std::vector<std::string> allow_origins;
    cors_settings cors;
    std::string cert_file; // absolute; with key_file: TLS
    std::string key_file;
    // A request that gets no warm kernel within this long is answered 429 (Retry-After).
    std::chrono::milliseconds queue_timeout{5000};
    // Requests waiting for a kernel at once; one more is answered 429 at once.
    std::size_t max_queue = 64;
    // Fresh kernels held connected per pool for the next requests (serve/spare_kernels.hpp).
    std::size_t spares = 1;
    // A /v1/run notebook's execute_requests at the kernel at once (runner/cell_pipeline); none:
    // runner::default_cells_ahead.
    std::optional<std::size_t> cells_ahead;
    std::size_t max_body = 16 << 20;
    std::size_t max_header = 64 << 10;              // names and values together; more: 431
    std::size_t max_connections = 1024;             // open at once; more wait in the listen backlog
    std::chrono::milliseconds resolve_every{30000}; // a dns: endpoint resolved again this often
    // On SIGTERM, requests in flight get this long to finish; then their code is interrupted.
    std::chrono::milliseconds stop_grace{30000};
    gateway_settings gateway;
    bool operator==(const serve_config&) const = default;
};

// "a, b c" -> {"a", "b", "c"}: the lists allow_origin, --allow-origin and --allow-host take.
std::vector<std::string> split_list(std::string_view text);

struct config {
    daemon_config daemon;
    std::vector<pool_config> pools;
    serve_config serve;

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
