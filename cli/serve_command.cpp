// `kpool serve`: the HTTP front door's command line: options, the token, then serve/'s loop.
#include "cli/commands.hpp"
#include "cli/duration.hpp"
#include "cli/exit_status.hpp"
#include "cli/remote_options.hpp"
#include "client/daemon_set.hpp"
#include "config/config.hpp"
#include "config/paths.hpp"
#include "serve/routing.hpp"
#include "serve/run_server.hpp"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>
#include <stdexcept>

namespace kpool::cli {
namespace {

constexpr const char* serve_usage_head = R"usage(usage: kpool [--endpoint E] serve [options]

Answers HTTP requests, each on a fresh warm kernel from kpoold, released after it
(docs/serve.md has every endpoint with curl examples):
)usage";

// After the endpoints, which the route tables list (serve/routing.hpp).
constexpr const char* serve_usage_options = R"usage(
options (each overrides its key in --config's [serve]):
  --config FILE           kpool.toml: its [serve] section, and its [daemon] control as the
                          endpoint unless --endpoint or $KPOOL_ENDPOINT says otherwise
  --listen HOST:PORT      where to listen (default 127.0.0.1:8890; port 0: any free port)
  --root DIR              the notebooks /v1/run/PATH may run (none without it)
  --save-dir DIR          keep every executed notebook as DIR/REQUEST_ID.ipynb (X-Request-Id)
  --kernel POOL           the pool a request without "kernel" runs on (default python3)
  --token-file FILE       callers must send `Authorization: token TOKEN` with the file's first
                          line ($KPOOL_SERVE_TOKEN works too). Without it, kpool serve makes
                          a token and writes it to $XDG_RUNTIME_DIR/kpool/serve-PORT.token
                          (0600; /run/kpool as root), removed when it stops
  --no-token              no token (loopback only): then any local user, and any web page
                          that gets past the Host and Origin checks, may run code as you
  --allow-origin O[,O..]  web page origins that may call (CORS; the server's own always may):
                          e.g. https://lab.example:8443; * for any (needs a token). Others: 403
  --allow-host H[,H..]    Host names accepted besides localhost and loopback addresses while
                          there is no token (DNS rebinding); * for any
  --cert FILE --key FILE  TLS (HTTP/1.1 and HTTP/2): a PEM certificate chain and its key
  --queue-timeout S       no warm kernel within S seconds: 429 + Retry-After (default 5)
  --max-queue N           more than N requests waiting for a kernel: 429 at once (default 64)
  --spares N              fresh kernels held connected per pool for the next requests and
                          gateway starts/restarts, so they pay no acquire and no handshake
                          (default 1; 0: none)
  --cells-ahead N         a /v1/run notebook's next cells wait at the kernel while one runs,
                          N requests at most, where the kernel stops at an error by itself
                          (ipykernel); the answer is the same (default 4; 1: one at a time)
  --max-body BYTES        larger request bodies: 413 (default 16777216)
  --max-header BYTES      larger request headers (names and values): 431 (default 65536)
  --max-connections N     connections open at once (websockets too); more wait in the listen
                          backlog until one closes (default 1024)
  --resolve-every S       with a dns:NAME:PORT endpoint, resolve NAME again every S seconds:
                          new kpoolds join, gone ones get no new requests (default 30)
  --stop-grace S          on SIGTERM, requests in flight get S seconds to finish, then their
                          code is interrupted and they are answered 503 (default 30)
gateway options (as Kernel Gateway's flags; in [serve]: cull_idle_timeout_s, cull_interval_s,
cull_connected, cull_busy, kernel_lease_s, env_whitelist, max_kernels, allow_credentials, ...):
  --cull-idle-timeout S   shut down gateway kernels idle for S seconds (default 0: never)
  --cull-interval S       how often to look for idle kernels (default 300)
  --cull-connected        cull idle kernels with a websocket connected too
  --cull-busy             cull busy kernels too
  --kernel-lease S        each kernel's lease (gateway kernels, spares), renewed while it is
                          held (default 120): kernels outlive a kpool serve that dies by this
                          much at most
  --env-whitelist A,B     variables a start request may set besides KERNEL_*
  --max-kernels N         gateway kernels held at once (403 beyond; default: no limit)
  --allow-credentials V --allow-headers V --allow-methods V --expose-headers V --max-age V
                          the other CORS headers, sent when set
)usage";

std::string serve_usage() {
    return serve_usage_head + serve::endpoint_help() + serve_usage_options;
}

struct bad_usage : std::runtime_error {
    using std::runtime_error::runtime_error;
};

double positive(const std::string& text, const std::string& option) {
    char* end = nullptr;
    const double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0' || !(v > 0) || v > 1e9) {
        throw bad_usage(option + " needs a positive number, not '" + text + "'");
    }
    return v;
}

// Seconds, or a duration with its unit (cli/duration.hpp).
std::chrono::milliseconds duration(const std::string& text, const std::string& option,
                                   bool allow_zero = false) {
    if (const auto d = parse_duration(text, bare_unit::seconds, allow_zero)) {
        return d->value;
    }
    throw bad_usage(duration_usage(option, text, bare_unit::seconds));
}

std::chrono::seconds whole_seconds(const std::string& text, const std::string& option,
                                   bool allow_zero = false) {
    return std::chrono::duration_cast<std::chrono::seconds>(duration(text, option, allow_zero));
}

// The token file's first line (cli/remote_options.hpp reads it for every client too).
std::string token_of(const std::string& path) {
    try {
        return read_token_file(path, "--token-file");
    } catch (const usage_error& e) {
        throw bad_usage(e.message);
    }
}

// `control` is the config's [daemon] control when --config names one.
serve::serve_options parse(const std::vector<std::string>& args, std::string& control) {
    serve::serve_options o;
    bool token_file_given = false, no_token_given = false, origins_given = false,
         hosts_given = false;
    if (const char* token = std::getenv("KPOOL_SERVE_TOKEN"); token != nullptr) {
        o.token = token;
    }
    for (std::size_t i = 0; i + 1 < args.size(); ++i) {
        if (args[i] == "--config") {
            auto cfg = config::load_config_file(args[i + 1]);
            if (!cfg) {
                throw bad_usage(cfg.err().message);
            }
            static_cast<config::serve_config&>(o) = cfg->serve; // the flags override it below
            if (!o.token_file.empty()) {
                o.token = token_of(o.token_file);
            }
            control = cfg->daemon.control;
            if (!cfg->daemon.runtime_dir.empty()) {
                o.token_dir = cfg->daemon.runtime_dir;
            }
        }
    }
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        auto value = [&]() -> const std::string& {
            if (i + 1 >= args.size()) {
                throw bad_usage(a + " needs a value");
            }
            return args[++i];
        };
        if (a == "--config") {
            value(); // read first, above
        } else if (a == "--listen") {
            const std::string& v = value();
            const auto colon = v.rfind(':');
            if (colon == std::string::npos || colon == 0) {
                throw bad_usage("--listen needs HOST:PORT, not '" + v + "'");
            }
            o.host = v.substr(0, colon);
            if (o.host.size() > 2 && o.host.front() == '[' && o.host.back() == ']') {
                o.host = o.host.substr(1, o.host.size() - 2);
            }
            const double port =
                v.substr(colon + 1) == "0" ? 0 : positive(v.substr(colon + 1), "--listen's port");
            if (port > 65535 || port != static_cast<int>(port)) {
                throw bad_usage("--listen's port must be from 0 to 65535");
            }
            o.port = static_cast<int>(port);
        } else if (a == "--root") {
            o.root = value();
        } else if (a == "--save-dir") {
            o.save_dir = value();
        } else if (a == "--kernel") {
            o.default_kernel = value();
        } else if (a == "--token-file") {
            o.token = token_of(value());
            token_file_given = true;
        } else if (a == "--no-token") {
            no_token_given = true;
        } else if (a == "--queue-timeout") {
            o.queue_timeout = duration(value(), a);
        } else if (a == "--max-queue") {
            o.max_queue = static_cast<std::size_t>(positive(value(), a));
        } else if (a == "--spares") {
            const std::string& v = value();
            const double n = v == "0" ? 0 : positive(v, a);
            if (n > 64 || n != static_cast<int>(n)) {
                throw bad_usage("--spares must be a whole number from 0 to 64");
            }
            o.spares = static_cast<std::size_t>(n);
        } else if (a == "--cells-ahead") {
            const std::string& v = value();
            const double n = positive(v, a);
            if (n > 64 || n != static_cast<int>(n)) {
                throw bad_usage("--cells-ahead must be a whole number from 1 to 64");
            }
            o.cells_ahead = static_cast<std::size_t>(n);
        } else if (a == "--cert") {
            o.cert_file = value();
        } else if (a == "--key") {
            o.key_file = value();
        } else if (a == "--stop-grace") {
            o.stop_grace = duration(value(), a);
        } else if (a == "--max-body") {
            o.max_body = static_cast<std::size_t>(positive(value(), a));
        } else if (a == "--max-header") {
            o.max_header = static_cast<std::size_t>(positive(value(), a));
        } else if (a == "--max-connections") {
            o.max_connections = static_cast<std::size_t>(positive(value(), a));
        } else if (a == "--resolve-every") {
            o.resolve_every = duration(value(), a);
        } else if (a == "--cull-idle-timeout") {
            o.gateway.cull_idle_timeout = whole_seconds(value(), a, true);
        } else if (a == "--cull-interval") {
            o.gateway.cull_interval = std::max(std::chrono::seconds(1), whole_seconds(value(), a));
        } else if (a == "--cull-connected") {
            o.gateway.cull_connected = true;
        } else if (a == "--cull-busy") {
            o.gateway.cull_busy = true;
        } else if (a == "--kernel-lease") {
            o.gateway.kernel_lease = std::max(std::chrono::seconds(3), whole_seconds(value(), a));
        } else if (a == "--env-whitelist") {
            std::stringstream names(value());
            for (std::string name; std::getline(names, name, ',');) {
                if (!name.empty()) {
                    o.gateway.env_whitelist.push_back(name);
                }
            }
        } else if (a == "--max-kernels") {
            o.gateway.max_kernels = static_cast<std::size_t>(positive(value(), a));
        } else if (a == "--allow-origin") {
            if (!origins_given) { // the flags replace the config's list
                o.allow_origins.clear();
                origins_given = true;
            }
            for (std::string& origin : serve::split_list(value())) {
                o.allow_origins.push_back(std::move(origin));
            }
        } else if (a == "--allow-host") {
            if (!hosts_given) {
                o.allow_hosts.clear();
                hosts_given = true;
            }
            for (std::string& host : serve::split_list(value())) {
                o.allow_hosts.push_back(std::move(host));
            }
        } else if (a == "--allow-credentials") {
            o.cors.allow_credentials = value();
        } else if (a == "--allow-headers") {
            o.cors.allow_headers = value();
        } else if (a == "--allow-methods") {
            o.cors.allow_methods = value();
        } else if (a == "--expose-headers") {
            o.cors.expose_headers = value();
        } else if (a == "--max-age") {
            o.cors.max_age = value();
        } else {
            throw bad_usage("unknown option '" + a + "'");
        }
    }
    if (no_token_given && (token_file_given || std::getenv("KPOOL_SERVE_TOKEN") != nullptr)) {
        throw bad_usage(
            "--no-token and a token (--token-file, $KPOOL_SERVE_TOKEN) contradict each other");
    }
    if (no_token_given) {
        o.token.clear(); // over a config's token_file
        o.no_token = true;
    } else if (!o.token.empty()) {
        o.no_token = false; // a token given anywhere wins over a config's require_token = false
    }
    return o;
}

} // namespace

int serve_command_line(const invocation& inv) {
    for (const std::string& w : inv.raw) {
        if (w == "-h" || w == "--help") {
            std::fputs(serve_usage().c_str(), stdout);
            return exit_status::ok;
        }
    }
    serve::serve_options options;
    std::string control; // from --config
    try {
        options = parse(inv.raw, control);
    } catch (const bad_usage& e) {
        std::fprintf(stderr, "kpool serve: %s\n\n%s", e.what(), serve_usage().c_str());
        return exit_status::usage;
    }
    if (options.token_dir.empty()) {
        options.token_dir = config::default_runtime_dir();
    }
    options.endpoint_setting = !inv.endpoint_given && !control.empty() ? control : inv.endpoint;
    auto endpoints = client::parse_endpoints(options.endpoint_setting);
    if (!endpoints) {
        std::fprintf(stderr, "kpool serve: %s\n", endpoints.err().message.c_str());
        return exit_status::usage;
    }
    options.endpoints = std::move(*endpoints);
    options.keys = inv.keys();
    return serve::run_server(options, stderr) == 0 ? exit_status::ok : exit_status::failed;
}

} // namespace kpool::cli
