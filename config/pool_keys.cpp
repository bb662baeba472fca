// [pools.NAME] and its limits and sandbox tables: a row per key (config/key_table.hpp), the
// keys that read several members or check others, and the checks between keys.
#include "config/section_readers.hpp"

#include "config/key_table.hpp"

#include <cctype>
#include <limits>

namespace kpool::config::detail {
namespace {

using enum reload_effect;

bool transport_name(const std::string& t) { return t == "tcp" || t == "ipc"; }
bool has_context_slot(const std::string& s) {
    return s.empty() || s.find("{context}") != std::string::npos;
}
bool not_root(const std::string& user) { return !user.empty() && user != "root" && user != "0"; }

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

// The pool's kernelspec (its name by default), and where that was chosen, for later problems.
void read_kernelspec(const toml::table& table, const key_row<pool_config>&, pool_config& p) {
    p.kernelspec = read_string(table, "kernelspec", p.name);
    const toml::node* node = table.get("kernelspec");
    p.kernelspec_at = position_text(node != nullptr ? node->source() : table.source());
    check_value(
        table, "kernelspec", [&] { return valid_pool_name(p.kernelspec); },
        "'kernelspec' must be a kernelspec name (letters, digits, '-', '_', '.')");
}

// size = N, or "auto" with min and max. Their bounds, which [daemon] max_kernels sets, are
// checked by check_sizes (a row knows only its own table).
void read_size(const toml::table& table, const key_row<pool_config>&, pool_config& p) {
    const toml::node* size = table.get("size");
    if (size == nullptr || !size->is_string()) {
        p.size = read_int(table, "size", p.size, std::numeric_limits<int>::min(),
                          std::numeric_limits<int>::max());
        for (std::string_view key : {"min", "max"}) {
            check_value(
                table, key, [] { return false; },
                "'" + std::string(key) + "' applies to size = \"auto\" only");
        }
        return;
    }
    if (size->as_string()->get() != "auto") {
        fail(size->source(), "'size' must be an integer or \"auto\"");
    }
    p.auto_size = true;
    p.min_size =
        read_int(table, "min", 0, std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
    if (table.get("max") == nullptr) {
        fail(size->source(), "size = \"auto\" needs 'max', the most warm kernels to keep");
    }
    p.max_size =
        read_int(table, "max", 0, std::numeric_limits<int>::min(), std::numeric_limits<int>::max());
    p.size = p.min_size;
}

// min and max are read with size.
void read_with_size(const toml::table&, const key_row<pool_config>&, pool_config&) {}

// preload = "learn" | "off" | ["module", ...]
void read_preload(const toml::table& table, const key_row<pool_config>&, pool_config& p) {
    if (const toml::node* preload = table.get("preload");
        preload != nullptr && preload->is_array()) {
        p.preload = preload_mode::list;
        p.preload_modules = read_names(table, "preload");
        for (const toml::node& item : *preload->as_array()) {
            const std::string& module = item.as_string()->get();
            if (!valid_module_name(module)) {
                fail(item.source(),
                     "'preload' lists module names (\"pandas\", \"matplotlib.pyplot\"), not \"" +
                         module + "\"");
            }
        }
        return;
    }
    const std::string mode = read_string(table, "preload", "learn");
    check_value(
        table, "preload", [&] { return mode == "learn" || mode == "off"; },
        "'preload' must be \"learn\", \"off\" or a list of module names");
    p.preload = mode == "off" ? preload_mode::off : preload_mode::learn;
}

// clang-format off
constexpr std::array limits_rows{
    number<&kernel_limits::address_space_mb>("address_space_mb", 64, 1 << 30,  replace_kernels),
    number<&kernel_limits::cpu_seconds>     ("cpu_seconds",      1,  1 << 30,  replace_kernels),
    number<&kernel_limits::open_files>      ("open_files",       16, 1 << 20,  replace_kernels),
    number<&kernel_limits::memory_mb>       ("memory_mb",        32, 1 << 30,  replace_kernels),
    number<&kernel_limits::processes>       ("processes",        16, 1 << 22,  replace_kernels),
};

constexpr std::array sandbox_rows{
    list<&sandbox_config::readable>("readable", list_kind::paths, replace_kernels),
    list<&sandbox_config::writable>("writable", list_kind::paths, replace_kernels),
    list<&sandbox_config::roots>   ("roots",    list_kind::paths, replace_kernels),
    key<&sandbox_config::network>  ("network",  replace_kernels),
    text<&sandbox_config::user>    ("user",     replace_kernels, not_root,
                                    "names who sandboxed kernels run as when kpoold is root: never root"),
};
// clang-format on

void read_limits(const toml::table& table, const key_row<pool_config>&, pool_config& p) {
    if (const toml::table* limits = sub_table(table, "limits")) {
        read_rows(*limits, limits_rows, "[pools." + p.name + ".limits]", p.limits);
    }
}

// [pools.NAME.sandbox], which needs isolation = "sandbox" (read before it).
void read_sandbox(const toml::table& table, const key_row<pool_config>&, pool_config& p) {
    const toml::table* sandbox = sub_table(table, "sandbox");
    if (sandbox == nullptr) {
        return;
    }
    if (p.isolation != isolation_kind::sandbox) {
        fail(table.get("sandbox")->source(),
             "[pools." + p.name + ".sandbox] applies to isolation = \"sandbox\" only");
    }
    read_rows(*sandbox, sandbox_rows, "[pools." + p.name + ".sandbox]", p.sandbox);
    if (!p.sandbox.network) {
        // The kernel's 127.0.0.1 is its own: kpoold reaches its channels over ipc sockets.
        check_value(
            table, "transport", [&] { return p.transport == "ipc"; },
            "network = false needs transport = \"ipc\" (the kernel's loopback is its own)");
        p.transport = "ipc";
    }
}

// clang-format off
// A key that changes what kernels are started with replaces the warm ones; one that changes only
// what a fork zygote holds rebuilds it; the rest (sizes, timeouts, leases) leave both as they are.
constexpr std::array pool_rows{
    custom<pool_config>("kernelspec", replace_kernels, read_kernelspec, same_members<&pool_config::kernelspec>),
    custom<pool_config>("size",       reconfigure,     read_size,
                        same_members<&pool_config::size, &pool_config::auto_size>),
    custom<pool_config>("min",        reconfigure,     read_with_size, same_members<&pool_config::min_size>),
    custom<pool_config>("max",        reconfigure,     read_with_size, same_members<&pool_config::max_size>),
    number<&pool_config::max_starting>       ("max_starting",        1, 64,       reconfigure),
    number<&pool_config::ready_timeout_s>    ("ready_timeout_s",     0, 3600,     reconfigure, true),
    number<&pool_config::lease_s>            ("lease_s",             0, 31536000, reconfigure),
    number<&pool_config::shutdown_grace_s>   ("shutdown_grace_s",    0, 60,       reconfigure),
    text<&pool_config::transport>            ("transport",           replace_kernels, transport_name,
                                              "must be \"tcp\" or \"ipc\""),
    text<&pool_config::ip>                   ("ip",                  replace_kernels, valid_ip,
                                              "must be an IPv4 or IPv6 address, not '{}'", true),
    text<&pool_config::context_snippet>      ("context_snippet",     reconfigure, has_context_slot,
                                              "must contain {context}, where the cwd and env go"),
    text<&pool_config::python>               ("python",              replace_kernels, absolute_path,
                                              "must be an absolute path to an interpreter, e.g. \"/usr/bin/python3\""),
    key<&pool_config::startup_code>          ("startup_code",        replace_kernels),
    key<&pool_config::launcher>              ("launcher",            replace_kernels),
    key<&pool_config::prime>                 ("prime",               replace_kernels),
    custom<pool_config>("preload",           rebuild_zygote,  read_preload,
                        same_members<&pool_config::preload, &pool_config::preload_modules>),
    number<&pool_config::preload_max_mb>     ("preload_max_mb",      16, 1 << 20, rebuild_zygote),
    key<&pool_config::prefault>              ("prefault",            rebuild_zygote),
    number<&pool_config::refill_delay_s>     ("refill_delay_s",      0, 10,       reconfigure),
    number<&pool_config::heartbeat_s>        ("heartbeat_s",         0, 86400,    reconfigure),
    number<&pool_config::heartbeat_timeout_s>("heartbeat_timeout_s", 0, 3600,     reconfigure, true),
    custom<pool_config>("limits",            replace_kernels, read_limits,    same_members<&pool_config::limits>),
    key<&pool_config::isolation>             ("isolation",           replace_kernels),
    custom<pool_config>("sandbox",           replace_kernels, read_sandbox,   same_members<&pool_config::sandbox>),
};
// clang-format on

// A pool's sizes: within [daemon] max_kernels, max at least min.
void check_sizes(const toml::table& table, const pool_config& p, const daemon_config& d) {
    const auto within = [&](std::string_view key, int value, int min) {
        check_value(
            table, key, [&] { return value >= min && value <= d.max_kernels; },
            "'" + std::string(key) + "' must be from " + std::to_string(min) + " to " +
                std::to_string(d.max_kernels) + ", not " + std::to_string(value));
    };
    if (!p.auto_size) {
        return within("size", p.size, 0);
    }
    within("min", p.min_size, 0);
    within("max", p.max_size, 1);
    check_value(
        table, "max", [&] { return p.max_size >= p.min_size; }, "'max' must be at least 'min'");
}

} // namespace

pool_config read_pool(const std::string& name, const toml::table& table, const daemon_config& d) {
    pool_config p;
    p.name = name;
    read_rows(table, pool_rows, "[pools." + name + "]", p);
    check_sizes(table, p, d);
    return p;
}

std::optional<std::string_view> pool_key_changed(const pool_config& now, const pool_config& next,
                                                 reload_effect effect) {
    return first_changed(pool_rows, now, next, effect);
}

std::vector<section_keys> pool_sections() {
    return {{"pools.NAME", names_of(pool_rows)},
            {"pools.NAME.limits", names_of(limits_rows)},
            {"pools.NAME.sandbox", names_of(sandbox_rows)}};
}

} // namespace kpool::config::detail
