// The readers of each section's rows (daemon_keys.cpp, pool_keys.cpp, serve_keys.cpp), for
// config.cpp and config_keys.cpp. Internal to config/.
#pragma once

#include "config/config.hpp"
#include "config/config_keys.hpp"

#include <toml++/toml.h>

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kpool::config::detail {

// The most kernels a daemon may hold ([daemon] max_kernels' own upper bound).
inline constexpr int max_kernels_limit = 4096;

daemon_config read_daemon(const toml::table& table);
std::optional<std::string_view> daemon_key_changed(const daemon_config& now,
                                                   const daemon_config& next, reload_effect effect);
std::vector<section_keys> daemon_sections();

pool_config read_pool(const std::string& name, const toml::table& table,
                      const daemon_config& daemon);
std::optional<std::string_view> pool_key_changed(const pool_config& now, const pool_config& next,
                                                 reload_effect effect);
std::vector<section_keys> pool_sections();

serve_config read_serve(const toml::table& table);
std::vector<section_keys> serve_sections();

} // namespace kpool::config::detail
