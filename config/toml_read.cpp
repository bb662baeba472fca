// config/toml_read.hpp's readers and validators.
#include "config/toml_read.hpp"

#include <arpa/inet.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <sstream>

namespace kpool::config::detail {

[[noreturn]] void fail(const toml::source_region& region, std::string message) {
    throw config_failure{region.begin, std::move(message)};
}

std::string position_text(const toml::source_region& region) {
    std::ostringstream out;
    out << (region.path ? *region.path : std::string("<config>")) << ':'
        << std::max<toml::source_index>(region.begin.line, 1) << ':'
        << std::max<toml::source_index>(region.begin.column, 1);
    return out.str();
}

const char* type_name(const toml::node& node) {
    switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    default: return "a date or time";
    }
}

void check_known_keys(const toml::table& table, std::string_view section,
                      std::initializer_list<std::string_view> known) {
    for (auto&& [key, node] : table) {
        if (std::find(known.begin(), known.end(), key.str()) == known.end()) {
            fail(key.source(),
                 "unknown key '" + std::string(key.str()) + "' in " + std::string(section));
        }
    }
}

const toml::table* sub_table(const toml::table& parent, std::string_view key) {
    const toml::node* node = parent.get(key);
    if (node == nullptr) {
        return nullptr;
    }
    if (!node->is_table()) {
        fail(node->source(), "'" + std::string(key) + "' must be a table, not " + type_name(*node));
    }
    return node->as_table();
}

std::string read_string(const toml::table& table, std::string_view key, std::string fallback) {
    const toml::node* node = table.get(key);
    if (node == nullptr) {
        return fallback;
    }
    if (!node->is_string()) {
        fail(node->source(),
             "'" + std::string(key) + "' must be a string, not " + type_name(*node));
    }
    return node->as_string()->get();
}

bool read_bool(const toml::table& table, std::string_view key, bool fallback) {
    const toml::node* node = table.get(key);
    if (node == nullptr) {
        return fallback;
    }
    if (!node->is_boolean()) {
        fail(node->source(),
             "'" + std::string(key) + "' must be true or false, not " + type_name(*node));
    }
    return node->as_boolean()->get();
}

int read_int(const toml::table& table, std::string_view key, int fallback, int min, int max) {
    const toml::node* node = table.get(key);
    if (node == nullptr) {
        return fallback;
    }
    if (!node->is_integer()) {
        fail(node->source(),
             "'" + std::string(key) + "' must be an integer, not " + type_name(*node));
    }
    const std::int64_t v = node->as_integer()->get();
    if (v < min || v > max) {
        fail(node->source(), "'" + std::string(key) + "' must be from " + std::to_string(min) +
                                 " to " + std::to_string(max) + ", not " + std::to_string(v));
    }
    return static_cast<int>(v);
}

double read_seconds(const toml::table& table, std::string_view key, double fallback, double min,
                    double max, bool min_exclusive) {
    const toml::node* node = table.get(key);
    if (node == nullptr) {
        return fallback;
    }
    double v = 0;
    if (node->is_integer()) {
        v = static_cast<double>(node->as_integer()->get());
    } else if (node->is_floating_point()) {
        v = node->as_floating_point()->get();
    } else {
        fail(node->source(),
             "'" + std::string(key) + "' must be a number of seconds, not " + type_name(*node));
    }
    if (!std::isfinite(v) || v < min || (min_exclusive && v == min) || v > max) {
        std::ostringstream msg;
        msg << "'" << key << "' must be " << (min_exclusive ? "above " : "at least ") << min
            << " and at most " << max << " seconds";
        fail(node->source(), msg.str());
    }
    return v;
}

std::optional<double> read_optional_seconds(const toml::table& table, std::string_view key,
                                            double min, double max) {
    if (table.get(key) == nullptr) {
        return std::nullopt;
    }
    return read_seconds(table, key, 0, min, max, false);
}

bool valid_pool_name(std::string_view name) {
    return !name.empty() && name.size() <= 64 && std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    });
}

std::string read_host(const toml::table& table, std::string_view key, std::string fallback) {
    std::string value = read_string(table, key, std::move(fallback));
    if (value.size() > 3 && value.starts_with("${") && value.ends_with("}")) {
        const std::string name = value.substr(2, value.size() - 3);
        const char* env = std::getenv(name.c_str());
        if (env == nullptr || *env == '\0') {
            fail(table.get(key)->source(), "'" + std::string(key) +
                                               "' names the environment variable " + name +
                                               ", which is not set");
        }
        value = env;
    }
    return value;
}

bool valid_host_name(const std::string& host) {
    return !host.empty() && host.size() <= 253 && std::all_of(host.begin(), host.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '-' || c == ':';
    });
}

bool valid_ip(const std::string& ip) {
    unsigned char buf[sizeof(in6_addr)];
    return inet_pton(AF_INET, ip.c_str(), buf) == 1 || inet_pton(AF_INET6, ip.c_str(), buf) == 1;
}

namespace {

// The array `key` holds (nothing if it is absent); fails at the value unless it is an array.
// `of` names what its items must be, for the message.
const toml::array* read_array(const toml::table& table, std::string_view key, std::string_view of) {
    const toml::node* node = table.get(key);
    if (node == nullptr) {
        return nullptr;
    }
    if (!node->is_array()) {
        fail(node->source(), "'" + std::string(key) + "' must be an array of " + std::string(of) +
                                 ", not " + type_name(*node));
    }
    return node->as_array();
}

} // namespace

std::vector<unsigned> read_ids(const toml::table& table, std::string_view key) {
    std::vector<unsigned> ids;
    if (const toml::array* items = read_array(table, key, "integers")) {
        for (const toml::node& item : *items) {
            const auto* v = item.as_integer();
            if (v == nullptr || v->get() < 0 || v->get() > 4294967294) {
                fail(item.source(),
                     "'" + std::string(key) + "' holds numeric ids from 0 to 4294967294");
            }
            ids.push_back(static_cast<unsigned>(v->get()));
        }
    }
    return ids;
}

bool valid_z85_key(std::string_view key) {
    constexpr std::string_view alphabet =
        "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#";
    return key.size() == 40 && std::all_of(key.begin(), key.end(), [&](char c) {
               return alphabet.find(c) != std::string_view::npos;
           });
}

std::vector<std::string> read_names(const toml::table& table, std::string_view key) {
    std::vector<std::string> names;
    if (const toml::array* items = read_array(table, key, "strings")) {
        for (const toml::node& item : *items) {
            const auto* v = item.as_string();
            if (v == nullptr || v->get().empty()) {
                fail(item.source(),
                     "'" + std::string(key) + "' must be an array of non-empty strings");
            }
            names.push_back(v->get());
        }
    }
    return names;
}

std::vector<std::string> read_keys(const toml::table& table, std::string_view key) {
    std::vector<std::string> keys;
    if (const toml::array* items = read_array(table, key, "strings")) {
        for (const toml::node& item : *items) {
            const auto* v = item.as_string();
            if (v == nullptr || !valid_z85_key(v->get())) {
                fail(item.source(), "'" + std::string(key) +
                                        "' holds CURVE public keys: 40 characters of Z85 text "
                                        "(`kpool keygen` makes them)");
            }
            keys.push_back(v->get());
        }
    }
    return keys;
}

std::vector<std::string> read_paths(const toml::table& table, std::string_view key) {
    std::vector<std::string> paths;
    if (const toml::array* items = read_array(table, key, "strings")) {
        for (const toml::node& item : *items) {
            const auto* v = item.as_string();
            const std::string normal =
                v == nullptr ? "" : std::filesystem::path(v->get()).lexically_normal().string();
            if (normal.empty() || normal.front() != '/' ||
                normal.find("/..") != std::string::npos) {
                fail(item.source(),
                     "'" + std::string(key) + "' must be an array of absolute paths");
            }
            paths.push_back(normal.size() > 1 && normal.back() == '/'
                                ? normal.substr(0, normal.size() - 1)
                                : normal);
        }
    }
    return paths;
}

bool valid_host_port(const std::string& text) {
    const auto colon = text.rfind(':');
    if (colon == std::string::npos || colon + 1 == text.size()) {
        return false;
    }
    const std::string port = text.substr(colon + 1);
    if (port.size() > 5 || !std::all_of(port.begin(), port.end(), ::isdigit) ||
        std::stoi(port) > 65535) {
        return false;
    }
    std::string host = text.substr(0, colon);
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        host = host.substr(1, host.size() - 2);
    }
    return host.empty() || valid_ip(host);
}

} // namespace kpool::config::detail
