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

// clang-format off
constexpr std::array serve_rows{
    custom<serve_config>("listen", reconfigure, read_listen, same_members<&serve_config::host, &serve_config::port>),
    text<&serve_config::root>          ("root",       reconfigure, absolute_or_none, "must be an absolute path"),
    text<&serve_config::save_dir>      ("save_dir",   reconfigure, absolute_or_none, "must be an absolute path"),
    text<&serve_config::token_file>    ("token_file", reconfigure, absolute_or_none, "must be an absolute path"),
    text<&serve_config::cert_file>     ("cert_file",  reconfigure, absolute_or_none, "must be an absolute path"),
    text<&serve_config::key_file>      ("key_file",   reconfigure, absolute_or_none, "must be an absolute path"),
    custom<serve_config>("require_token", reconfigure, read_require_token, same_members<&serve_config::no_token>),
    key<&serve_config::allow_hosts>    ("allow_hosts", reconfigure),
    text<&serve_config::default_kernel>("kernel",     reconfigure, pool_name,
                                        "must be a pool name (letters, digits, '-', '_', '.')"),
    number<&serve_config::queue_timeout>  ("queue_timeout_s", 0,    3600,    reconfigure, true),
    number<&serve_config::max_queue>      ("max_queue",       1,    100000,  reconfigure),
    number<&serve_config::spares>         ("spares",          0,    64,      reconfigure),
    number<&serve_config::cells_ahead>    ("cells_ahead",     1,    64,      reconfigure),
    number<&serve_config::max_body>       ("max_body",        1024, 1 << 30, reconfigure),
    number<&serve_config::max_header>     ("max_header",      1024, 1 << 20, reconfigure),
    number<&serve_config::max_connections>("max_connections", 1,    1000000, reconfigure),
    number<&serve_config::resolve_every>  ("resolve_every_s", 0.1,  86400,   reconfigure),
    number<&serve_config::stop_grace>     ("stop_grace_s",    0,    3600,    reconfigure, true),
    custom<serve_config>("allow_origin", reconfigure, read_allow_origin, same_members<&serve_config::allow_origins>),
};

constexpr std::array gateway_rows{
    number<&gateway_settings::cull_idle_timeout>("cull_idle_timeout_s", 0, 604800, reconfigure),
    number<&gateway_settings::cull_interval>    ("cull_interval_s",     1, 86400,  reconfigure),
    key<&gateway_settings::cull_connected>      ("cull_connected",      reconfigure),
    key<&gateway_settings::cull_busy>           ("cull_busy",           reconfigure),
    number<&gateway_settings::kernel_lease>     ("kernel_lease_s",      3, 86400,  reconfigure),
    key<&gateway_settings::env_whitelist>       ("env_whitelist",       reconfigure),
    number<&gateway_settings::max_kernels>      ("max_kernels",         0, 100000, reconfigure),
};

constexpr std::array cors_rows{
    key<&cors_settings::allow_credentials>("allow_credentials", reconfigure),
    key<&cors_settings::allow_headers>    ("allow_headers",     reconfigure),
    key<&cors_settings::allow_methods>    ("allow_methods",     reconfigure),
    key<&cors_settings::expose_headers>   ("expose_headers",    reconfigure),
    key<&cors_settings::max_age>          ("max_age",           reconfigure),
};
// clang-format on

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
