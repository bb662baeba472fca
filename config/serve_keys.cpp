// [serve]: a row per key (config/key_table.hpp), read straight into what kpool serve runs with;
// its gateway and CORS keys sit in the same table, stored in structs of their own.
#include "config/key_table.hpp"
#include "config/section_readers.hpp"

namespace kpool::config::detail {
namespace {

using enum reload_effect; // kpool serve reads its config once: every row says reconfigure

bool absolute_or_none(const std::string& path) { return path.empty() || path.starts_with('/'); }
bool pool_name(const std::string& name) { return valid_pool_name(name); }

// listen = "HOST:PORT", an IP address ("[::1]:8890" for IPv6).
void read_listen(const toml::table& table, const key_row<serve_config>&, serve_config& s) {
    if (table.get("listen") == nullptr) {
        return;
    }
    const std::string listen = read_string(table, "listen", "");
    check_value(
        table, "listen", [&] { return valid_host_port(listen) && listen.front() != ':'; },
        "'listen' must be HOST:PORT with an IP address, e.g. \"127.0.0.1:8890\"");
    const auto colon = listen.rfind(':');
    s.host = listen.substr(0, colon);
    if (s.host.size() > 2 && s.host.front() == '[' && s.host.back() == ']') {
        s.host = s.host.substr(1, s.host.size() - 2);
    }
    s.port = std::stoi(listen.substr(colon + 1));
}

void read_require_token(const toml::table& table, const key_row<serve_config>&, serve_config& s) {
    s.no_token = !read_bool(table, "require_token", !s.no_token);
}

// allow_origin = "https://a.example, https://b.example" (or "*").
void read_allow_origin(const toml::table& table, const key_row<serve_config>&, serve_config& s) {
    if (table.get("allow_origin") != nullptr) {
        s.allow_origins = split_list(read_string(table, "allow_origin", ""));
    }
}

using fk = flag_kind;

// clang-format off
// kpool serve's keys, each with the flag that sets it too (--help lists them in this order).
constexpr std::array serve_rows{
    flagged(custom<serve_config>("listen", reconfigure, read_listen,
                                 same_members<&serve_config::host, &serve_config::port>),
            "--listen", "HOST:PORT", fk::text, "where to listen (default 127.0.0.1:8890; port 0: any free port)"),
    flagged(text<&serve_config::root>("root", reconfigure, absolute_or_none, "must be an absolute path"),
            "--root", "DIR", fk::path, "the notebooks /v1/run/PATH may run (none without it)"),
    flagged(text<&serve_config::save_dir>("save_dir", reconfigure, absolute_or_none, "must be an absolute path"),
            "--save-dir", "DIR", fk::path, "keep every executed notebook as DIR/REQUEST_ID.ipynb (X-Request-Id)"),
    flagged(text<&serve_config::default_kernel>("kernel", reconfigure, pool_name,
                                                "must be a pool name (letters, digits, '-', '_', '.')"),
            "--kernel", "POOL", fk::text, "the pool a request without \"kernel\" runs on (default python3)"),
    flagged(text<&serve_config::token_file>("token_file", reconfigure, absolute_or_none, "must be an absolute path"),
            "--token-file", "FILE", fk::path,
            "callers must send `Authorization: token TOKEN` with the file's first\n"
            "line ($KPOOL_SERVE_TOKEN works too). Without it, kpool serve makes\n"
            "a token and writes it to $XDG_RUNTIME_DIR/kpool/serve-PORT.token\n"
            "(0600; /run/kpool as root), removed when it stops"),
    custom<serve_config>("require_token", reconfigure, read_require_token, same_members<&serve_config::no_token>),
    flagged(custom<serve_config>("allow_origin", reconfigure, read_allow_origin,
                                 same_members<&serve_config::allow_origins>),
            "--allow-origin", "O[,O..]", fk::text,
            "web page origins that may call (CORS; the server's own always may):\n"
            "e.g. https://lab.example:8443; * for any (needs a token). Others: 403", true),
    flagged(key<&serve_config::allow_hosts>("allow_hosts", reconfigure),
            "--allow-host", "H[,H..]", fk::names,
            "Host names accepted besides localhost and loopback addresses while\n"
            "there is no token (DNS rebinding); * for any", true),
    flagged(text<&serve_config::cert_file>("cert_file", reconfigure, absolute_or_none, "must be an absolute path"),
            "--cert", "FILE", fk::path, "TLS (HTTP/1.1 and HTTP/2): a PEM certificate chain, with --key"),
    flagged(text<&serve_config::key_file>("key_file", reconfigure, absolute_or_none, "must be an absolute path"),
            "--key", "FILE", fk::path, "the certificate's private key (PEM)"),
    flagged(number<&serve_config::queue_timeout>("queue_timeout_s", 0, 3600, reconfigure, true),
            "--queue-timeout", "S", fk::seconds, "no warm kernel within S seconds: 429 + Retry-After (default 5)"),
    flagged(number<&serve_config::max_queue>("max_queue", 1, 100000, reconfigure),
            "--max-queue", "N", fk::integer, "more than N requests waiting for a kernel: 429 at once (default 64)"),
    flagged(number<&serve_config::spares>("spares", 0, 64, reconfigure),
            "--spares", "N", fk::integer,
            "fresh kernels held connected per pool for the next requests and\n"
            "gateway starts/restarts, so they pay no acquire and no handshake\n"
            "(default 1; 0: none)"),
    flagged(number<&serve_config::cells_ahead>("cells_ahead", 1, 64, reconfigure),
            "--cells-ahead", "N", fk::integer,
            "a /v1/run notebook's next cells wait at the kernel while one runs,\n"
            "N requests at most, where the kernel stops at an error by itself\n"
            "(ipykernel); the answer is the same (default 4; 1: one at a time)"),
    flagged(number<&serve_config::max_body>("max_body", 1, 1 << 30, reconfigure),
            "--max-body", "BYTES", fk::integer, "larger request bodies: 413 (default 16777216)"),
    flagged(number<&serve_config::max_header>("max_header", 1024, 1 << 20, reconfigure),
            "--max-header", "BYTES", fk::integer, "larger request headers (names and values): 431 (default 65536)"),
    flagged(number<&serve_config::max_connections>("max_connections", 1, 1000000, reconfigure),
            "--max-connections", "N", fk::integer,
            "connections open at once (websockets too); more wait in the listen\n"
            "backlog until one closes (default 1024)"),
    flagged(number<&serve_config::resolve_every>("resolve_every_s", 0.1, 86400, reconfigure),
            "--resolve-every", "S", fk::seconds,
            "with a dns:NAME:PORT endpoint, resolve NAME again every S seconds:\n"
            "new kpoolds join, gone ones get no new requests (default 30)"),
    flagged(number<&serve_config::stop_grace>("stop_grace_s", 0, 3600, reconfigure, true),
            "--stop-grace", "S", fk::seconds,
            "on SIGTERM, requests in flight get S seconds to finish, then their\n"
            "code is interrupted and they are answered 503 (default 30)"),
};

// The Kernel Gateway API's, named as Kernel Gateway's flags are.
constexpr std::array gateway_rows{
    flagged(number<&gateway_settings::cull_idle_timeout>("cull_idle_timeout_s", 0, 604800, reconfigure),
            "--cull-idle-timeout", "S", fk::seconds, "shut down gateway kernels idle for S seconds (default 0: never)"),
    flagged(number<&gateway_settings::cull_interval>("cull_interval_s", 1, 86400, reconfigure),
            "--cull-interval", "S", fk::seconds, "how often to look for idle kernels (default 300)"),
    flagged(key<&gateway_settings::cull_connected>("cull_connected", reconfigure),
            "--cull-connected", "", fk::toggle, "cull idle kernels with a websocket connected too"),
    flagged(key<&gateway_settings::cull_busy>("cull_busy", reconfigure),
            "--cull-busy", "", fk::toggle, "cull busy kernels too"),
    flagged(number<&gateway_settings::kernel_lease>("kernel_lease_s", 3, 86400, reconfigure),
            "--kernel-lease", "S", fk::seconds,
            "each kernel's lease (gateway kernels, spares), renewed while it is\n"
            "held (default 120): kernels outlive a kpool serve that dies by this\n"
            "much at most"),
    flagged(key<&gateway_settings::env_whitelist>("env_whitelist", reconfigure),
            "--env-whitelist", "A,B", fk::names, "variables a start request may set besides KERNEL_*"),
    flagged(number<&gateway_settings::max_kernels>("max_kernels", 0, 100000, reconfigure),
            "--max-kernels", "N", fk::integer, "gateway kernels held at once (403 beyond; default 0: no limit)"),
};

constexpr std::array cors_rows{
    flagged(key<&cors_settings::allow_credentials>("allow_credentials", reconfigure),
            "--allow-credentials", "V", fk::text, "Access-Control-Allow-Credentials, sent when set"),
    flagged(key<&cors_settings::allow_headers>("allow_headers", reconfigure),
            "--allow-headers", "V", fk::text, "Access-Control-Allow-Headers, sent when set"),
    flagged(key<&cors_settings::allow_methods>("allow_methods", reconfigure),
            "--allow-methods", "V", fk::text, "Access-Control-Allow-Methods, sent when set"),
    flagged(key<&cors_settings::expose_headers>("expose_headers", reconfigure),
            "--expose-headers", "V", fk::text, "Access-Control-Expose-Headers, sent when set"),
    flagged(key<&cors_settings::max_age>("max_age", reconfigure),
            "--max-age", "V", fk::text, "Access-Control-Max-Age, sent when set"),
};
// clang-format on

template <class Section, std::size_t N>
void add_flags(const std::array<key_row<Section>, N>& rows, std::vector<serve_flag>& into) {
    for (const key_row<Section>& row : rows) {
        if (row.flag.kind != flag_kind::none) {
            into.push_back(row.flag);
        }
    }
}

// The row of `key` reads `table` into its struct; false when no row has it.
template <class Section, std::size_t N>
bool read_key(const std::array<key_row<Section>, N>& rows, std::string_view key,
              const toml::table& table, Section& into) {
    for (const key_row<Section>& row : rows) {
        if (row.name == key) {
            row.read(table, row, into);
            return true;
        }
    }
    return false;
}

} // namespace

serve_config read_serve(const toml::table& table) {
    check_known(table, "[serve]", [](std::string_view key) {
        return has_row(serve_rows, key) || has_row(gateway_rows, key) || has_row(cors_rows, key);
    });
    serve_config s;
    read_each(table, serve_rows, s);
    read_each(table, gateway_rows, s.gateway);
    read_each(table, cors_rows, s.cors);
    if (s.cert_file.empty() != s.key_file.empty()) {
        fail(table.get(s.cert_file.empty() ? "key_file" : "cert_file")->source(),
             "TLS needs both 'cert_file' and 'key_file'");
    }
    return s;
}

std::vector<section_keys> serve_sections() {
    section_keys keys{"serve", names_of(serve_rows)};
    for (const auto& more : {names_of(gateway_rows), names_of(cors_rows)}) {
        keys.keys.insert(keys.keys.end(), more.begin(), more.end());
    }
    return {keys};
}

} // namespace kpool::config::detail

namespace kpool::config {

using namespace detail;

std::vector<serve_flag_group> serve_flags() {
    serve_flag_group own{false, {}};
    serve_flag_group gateway{true, {}};
    add_flags(serve_rows, own.flags);
    add_flags(gateway_rows, gateway.flags);
    add_flags(cors_rows, gateway.flags);
    return {own, gateway};
}

status set_serve_key(serve_config& into, std::string_view key, const flag_value& value) {
    toml::table table;
    std::visit(
        [&](const auto& v) {
            using T = std::decay_t<decltype(v)>;
            if constexpr (std::is_same_v<T, std::vector<std::string>>) {
                toml::array list;
                for (const std::string& item : v) {
                    list.push_back(item);
                }
                table.insert(key, std::move(list));
            } else {
                table.insert(key, v);
            }
        },
        value);
    try {
        if (read_key(serve_rows, key, table, into) ||
            read_key(gateway_rows, key, table, into.gateway) ||
            read_key(cors_rows, key, table, into.cors)) {
            return ok_status();
        }
        return error{errc::internal, "no [serve] key '" + std::string(key) + "'"};
    } catch (const config_failure& f) {
        return error{errc::bad_request, f.message};
    }
}

} // namespace kpool::config
