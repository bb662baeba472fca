// The config's keys as tables (config/key_table.hpp has the row type; the rows are in
// daemon_keys.cpp, pool_keys.cpp and serve_keys.cpp): what a reload does about a changed key, and
// each section's key names, which a test checks against config/kpool.example.toml.
#pragma once

#include "config/config.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kpool::config {

// What a running kpoold does when SIGHUP brings a new value of a key.
enum class reload_effect {
    restart, // nothing: it shapes the socket or directory already bound; the reload is refused
    replace_kernels, // warm kernels (and a fork pool's zygote) are not what the new value starts
    rebuild_zygote,  // a fork pool's zygote is rebuilt; its kernels stay
    reconfigure,     // taken as it is: sizes, timeouts, leases, what acquires apply
};

// The first [daemon] key of `effect` whose value differs between the two, if any.
std::optional<std::string_view> changed_daemon_key(const daemon_config& now,
                                                   const daemon_config& next, reload_effect effect);
// The first [pools.NAME] key (its limits and sandbox tables included) of `effect` whose value
// differs between the two, if any.
std::optional<std::string_view> changed_pool_key(const pool_config& now, const pool_config& next,
                                                 reload_effect effect);

// How a flag's text becomes its key's value (cli/serve_command.cpp reads it so).
enum class flag_kind {
    none,    // the key has no flag
    toggle,  // a switch: true
    text,    // as written
    path,    // made absolute
    integer, // a whole number
    seconds, // a duration: seconds, or a number with its unit (500ms, 2m)
    names,   // "a,b c": a list
};

// A [serve] key as a `kpool serve` flag (the key's row says both).
struct serve_flag {
    std::string_view flag; // "--max-queue"
    std::string_view arg;  // "N" in the help; empty for a switch
    std::string_view key;
    flag_kind kind = flag_kind::none;
    std::string_view help; // '\n' starts another line
    bool repeats = false;  // given again, it adds to the list (and replaces the file's)
};

// Every [serve] flag, in the order `kpool serve --help` lists them: kpool serve's own options,
// then the Kernel Gateway API's (`gateway` true).
struct serve_flag_group {
    bool gateway;
    std::vector<serve_flag> flags;
};
std::vector<serve_flag_group> serve_flags();

// A value from a flag: toggle true, integer, seconds, text or path, names.
using flag_value = std::variant<bool, std::int64_t, double, std::string, std::vector<std::string>>;
// Sets `key` of [serve] as the file's value would be read and checked; the message says what is
// wrong with it, naming the key ('max_queue').
status set_serve_key(serve_config& into, std::string_view key, const flag_value& value);

// Each table's keys, by its name as the example file writes it: "daemon", "pools.NAME",
// "pools.NAME.limits", "pools.NAME.sandbox", "serve".
struct section_keys {
    std::string section;
    std::vector<std::string_view> keys;
};
std::vector<section_keys> all_keys();

} // namespace kpool::config
