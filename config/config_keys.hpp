// The config's keys as tables (config/key_table.hpp has the row type; the rows are in
// daemon_keys.cpp, pool_keys.cpp and serve_keys.cpp): what a reload does about a changed key, and
// each section's key names, which a test checks against config/kpool.example.toml.
#pragma once

#include "config/config.hpp"

#include <optional>
#include <string>
#include <string_view>
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

// Each table's keys, by its name as the example file writes it: "daemon", "pools.NAME",
// "pools.NAME.limits", "pools.NAME.sandbox", "serve".
struct section_keys {
    std::string section;
    std::vector<std::string_view> keys;
};
std::vector<section_keys> all_keys();

} // namespace kpool::config
