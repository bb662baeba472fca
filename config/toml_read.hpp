// The pieces config.cpp reads TOML with: typed readers that know each key's range, validators
// for the values they return, and the one way to fail (config_failure, which parse_config turns
// into a file:line:col diagnostic). Internal to config/.
#pragma once

#include <toml++/toml.h>

#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kpool::config::detail {

// Thrown by the readers, turned into one file:line:col diagnostic by parse_config.
struct config_failure {
    toml::source_position where;
    std::string message;
};

[[noreturn]] void fail(const toml::source_region& region, std::string message);

// "file:line:col" of where a region begins, for problems found after parsing.
std::string position_text(const toml::source_region& region);
const char* type_name(const toml::node& node);
void check_known_keys(const toml::table& table, std::string_view section,
                      std::initializer_list<std::string_view> known);
const toml::table* sub_table(const toml::table& parent, std::string_view key);

std::string read_string(const toml::table& table, std::string_view key, std::string fallback);
bool read_bool(const toml::table& table, std::string_view key, bool fallback);
int read_int(const toml::table& table, std::string_view key, int fallback, int min, int max);
// Seconds may be written as an integer or a float.
double read_seconds(const toml::table& table, std::string_view key, double fallback, double min,
                    double max, bool min_exclusive);
// A number of seconds with no default of its own: unset when the key is absent.
std::optional<double> read_optional_seconds(const toml::table& table, std::string_view key,
                                            double min, double max);
// A host value as written, or the environment variable it names as "${NAME}" (Kubernetes gives
// a pod its IP only that way: the downward API's POD_IP). Unset is a config error.
std::string read_host(const toml::table& table, std::string_view key, std::string fallback);
std::vector<unsigned> read_ids(const toml::table& table, std::string_view key);
std::vector<std::string> read_names(const toml::table& table, std::string_view key);
std::vector<std::string> read_keys(const toml::table& table, std::string_view key);
// Absolute paths, each normalised (no "." or ".." parts, no trailing '/').
std::vector<std::string> read_paths(const toml::table& table, std::string_view key);

template <class Check>
void check_value(const toml::table& table, std::string_view key, Check&& is_valid,
                 const std::string& message) {
    if (const toml::node* node = table.get(key); node != nullptr && !is_valid()) {
        fail(node->source(), message);
    }
}

bool valid_pool_name(std::string_view name);
inline bool absolute_path(const std::string& path) { return path.starts_with('/'); }
// A DNS name or an address, as clients on other hosts would use it.
bool valid_host_name(const std::string& host);
bool valid_ip(const std::string& ip);
bool valid_z85_key(std::string_view key);
// "127.0.0.1:9464", "[::1]:9464" or ":9464" (all addresses), as prometheus-cpp takes it.
bool valid_host_port(const std::string& text);

} // namespace kpool::config::detail
