// [daemon]: a row per key (config/key_table.hpp), the keys read by code of their own, and the
// checks between keys (an endpoint's kind decides which access keys apply).
#include "config/key_table.hpp"
#include "config/paths.hpp"
#include "config/section_readers.hpp"

#include <sys/un.h>

#include <charconv>

namespace kpool::config::detail {
namespace {

using enum reload_effect;

bool log_level_name(const std::string& level) {
    for (std::string_view known : {"trace", "debug", "info", "warn", "error", "critical", "off"}) {
        if (level == known) {
            return true;
        }
    }
    return false;
}
bool host_or_none(const std::string& host) { return host.empty() || valid_host_name(host); }
bool host_port_or_none(const std::string& text) { return text.empty() || valid_host_port(text); }

// control: an ipc:// endpoint in runtime_dir unless set (runtime_dir is read first).
void read_control(const toml::table& table, const key_row<daemon_config>&, daemon_config& d) {
    d.control = read_string(table, "control", default_control_endpoint(d.runtime_dir));
    const std::string_view ipc = "ipc://";
    check_value(
        table, "control", [&] { return d.control.starts_with(ipc) || d.is_tcp(); },
        "'control' must be an ipc:// or tcp:// endpoint");
    check_value(
        table, "control",
        [&] {
            return !d.control.starts_with(ipc) ||
                   d.control.size() - ipc.size() < sizeof(sockaddr_un::sun_path);
        },
        "'control' ipc path is longer than a Unix socket path may be (107 bytes)");
}

// kernel_ports = "auto" | "ephemeral" | "FIRST-LAST" (room for at least one kernel's five).
void read_kernel_ports(const toml::table& table, const key_row<daemon_config>&, daemon_config& d) {
    const std::string text = read_string(table, "kernel_ports", "auto");
    if (text == "auto" || text == "ephemeral") {
        d.kernel_ports =
            text == "auto" ? kernel_port_source::automatic : kernel_port_source::ephemeral;
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
    check_value(
        table, "kernel_ports", [&] { return parsed; },
        "'kernel_ports' must be \"auto\", \"ephemeral\" or a range such as "
        "\"61000-65535\", not '" +
            text + "'");
    check_value(
        table, "kernel_ports",
        [&] { return first >= 1024 && last <= 65535 && first <= last && last - first >= 4; },
        "'kernel_ports' must lie within 1024-65535 and hold at least 5 ports (one "
        "kernel's), not '" +
            text + "'");
    d.kernel_ports = kernel_port_source::range;
    d.kernel_ports_first = static_cast<std::uint16_t>(first);
    d.kernel_ports_last = static_cast<std::uint16_t>(last);
}

// clang-format off
// What shapes the control socket, the runtime directory it has bound and locked, or the
// metrics listener takes a restart; the rest a reload applies.
constexpr std::array daemon_rows{
    text<&daemon_config::runtime_dir>("runtime_dir", restart, absolute_path, "must be an absolute path"),
    text<&daemon_config::state_dir>  ("state_dir",   reconfigure, absolute_path, "must be an absolute path"),
    custom<daemon_config>("control", restart, read_control, same_members<&daemon_config::control>),
    key<&daemon_config::allowed_uids>("allowed_uids", restart),
    key<&daemon_config::allowed_gids>("allowed_gids", restart),
    text<&daemon_config::curve_secret_key_file>("curve_secret_key_file", restart, absolute_path,
                                                "must be an absolute path"),
    list<&daemon_config::curve_allowed_keys>   ("curve_allowed_keys", list_kind::keys, restart),
    text<&daemon_config::log_level>  ("log_level",   reconfigure, log_level_name,
                                      "must be one of trace, debug, info, warn, error, critical, off"),
    number<&daemon_config::max_kernels>       ("max_kernels",        1, max_kernels_limit, reconfigure),
    key<&daemon_config::background_priority>  ("background_priority", reconfigure),
    number<&daemon_config::background_limit_s>("background_limit_s", 0, 3600, reconfigure),
    number<&daemon_config::refill_delay_s>    ("refill_delay_s",     0, 10,   reconfigure),
    text<&daemon_config::advertise_host>      ("advertise_host",     reconfigure, host_or_none,
                                               "must be a host name or an address, not '{}'", true),
    custom<daemon_config>("kernel_ports", reconfigure, read_kernel_ports,
                          same_members<&daemon_config::kernel_ports, &daemon_config::kernel_ports_first,
                                       &daemon_config::kernel_ports_last>),
    text<&daemon_config::metrics>     ("metrics",     restart, host_port_or_none,
                                       "must be HOST:PORT, e.g. \"127.0.0.1:9464\""),
};
// clang-format on

// Which access keys apply: CURVE for tcp://, peer ids for ipc://.
void check_access(const toml::table& table, const daemon_config& d) {
    check_value(
        table, "control",
        [&] {
            return !d.is_tcp() ||
                   (!d.curve_secret_key_file.empty() && !d.curve_allowed_keys.empty());
        },
        "a tcp:// control endpoint needs CURVE: set 'curve_secret_key_file' and "
        "'curve_allowed_keys' (anyone who reaches the port could take kernels otherwise)");
    for (std::string_view key : {"allowed_uids", "allowed_gids"}) {
        check_value(
            table, key, [&] { return !d.is_tcp(); },
            "'" + std::string(key) +
                "' applies to ipc:// endpoints only; tcp clients "
                "are authenticated by 'curve_allowed_keys'");
    }
    for (std::string_view key : {"curve_secret_key_file", "curve_allowed_keys"}) {
        check_value(
            table, key, [&] { return d.is_tcp(); },
            "'" + std::string(key) + "' applies to tcp:// endpoints only");
    }
}

} // namespace

daemon_config read_daemon(const toml::table& table) {
    daemon_config d;
    d.runtime_dir = default_runtime_dir();
    d.state_dir = default_state_dir();
    read_rows(table, daemon_rows, "[daemon]", d);
    check_access(table, d);
    return d;
}

std::optional<std::string_view>
daemon_key_changed(const daemon_config& now, const daemon_config& next, reload_effect effect) {
    return first_changed(daemon_rows, now, next, effect);
}

std::vector<section_keys> daemon_sections() { return {{"daemon", names_of(daemon_rows)}}; }

} // namespace kpool::config::detail
