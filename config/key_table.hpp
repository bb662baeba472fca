// A config section as a table (redis's static_configs[]): a row per key with its name, where it
// is stored, its kind (from the member's type), bounds or choices, and what changing it takes on
// a reload. The section's known keys, its reader and reload.cpp's comparisons all follow from the
// rows; the default is the member's initializer in config.hpp. Internal to config/.
#pragma once

#include "config/config.hpp"
#include "config/config_keys.hpp"
#include "config/toml_read.hpp"

#include <toml++/toml.h>

#include <algorithm>
#include <array>
#include <chrono>
#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

namespace kpool::config::detail {

// How a list of strings is checked: names (non-empty), absolute paths (normalised), CURVE keys.
enum class list_kind { names, paths, keys };

template <class Section>
struct key_row {
    std::string_view name;
    reload_effect reload = reload_effect::reconfigure;
    void (*read)(const toml::table& table, const key_row& row, Section& into) = nullptr;
    bool (*same)(const Section& a, const Section& b) = nullptr;
    // Numbers: the range (seconds: above `min` when min_exclusive).
    double min = 0;
    double max = 0;
    bool min_exclusive = false;
    // Strings: a check of the value read, and the message's words after "'KEY' " when it fails
    // ("{}" becomes the value).
    bool (*valid)(const std::string& value) = nullptr;
    std::string_view must;
    bool host = false; // "${NAME}" is the environment variable NAME (read_host)
    list_kind list = list_kind::names;
    // A command-line flag that sets the key too (kpool serve's), its value's kind and help.
    serve_flag flag;
};

template <class T>
struct member_of;
template <class S, class T>
struct member_of<T S::*> {
    using section = S;
    using type = T;
};

template <auto Member>
using section_of = typename member_of<decltype(Member)>::section;

template <class T>
inline constexpr bool is_duration = false;
template <class R, class P>
inline constexpr bool is_duration<std::chrono::duration<R, P>> = true;

// Reads the row's key into the member, with the member's value as the default.
template <auto Member>
void read_member(const toml::table& table, const key_row<section_of<Member>>& row,
                 section_of<Member>& into) {
    using T = typename member_of<decltype(Member)>::type;
    T& field = into.*Member;
    const std::string_view key = row.name;
    if constexpr (std::is_same_v<T, bool>) {
        field = read_bool(table, key, field);
    } else if constexpr (std::is_same_v<T, int>) {
        field = read_int(table, key, field, static_cast<int>(row.min), static_cast<int>(row.max));
    } else if constexpr (std::is_same_v<T, std::size_t>) {
        field = static_cast<std::size_t>(read_int(table, key, static_cast<int>(field),
                                                  static_cast<int>(row.min),
                                                  static_cast<int>(row.max)));
    } else if constexpr (std::is_same_v<T, std::optional<std::size_t>>) {
        if (table.get(key) != nullptr) {
            field = static_cast<std::size_t>(
                read_int(table, key, 0, static_cast<int>(row.min), static_cast<int>(row.max)));
        }
    } else if constexpr (std::is_same_v<T, double>) {
        field = read_seconds(table, key, field, row.min, row.max, row.min_exclusive);
    } else if constexpr (std::is_same_v<T, std::optional<double>>) {
        field = read_optional_seconds(table, key, row.min, row.max);
    } else if constexpr (is_duration<T>) {
        const double fallback = std::chrono::duration<double>(field).count();
        const double s = read_seconds(table, key, fallback, row.min, row.max, row.min_exclusive);
        field = std::chrono::duration_cast<T>(std::chrono::duration<double>(s));
    } else if constexpr (std::is_same_v<T, std::string>) {
        field = row.host ? read_host(table, key, field) : read_string(table, key, field);
        if (row.valid != nullptr) {
            std::string message = "'" + std::string(key) + "' " + std::string(row.must);
            if (const auto at = message.find("{}"); at != std::string::npos) {
                message.replace(at, 2, field);
            }
            check_value(
                table, key, [&] { return row.valid(field); }, message);
        }
    } else if constexpr (std::is_enum_v<T>) {
        const toml::node* node = table.get(key);
        if (node == nullptr) {
            return;
        }
        const auto value = named<T>(read_string(table, key, ""));
        if (!value) {
            // "a", "b" or "c"
            std::string choices;
            const auto& names = enum_names<T>::names;
            for (std::size_t i = 0; i < names.size(); ++i) {
                choices += (i == 0 ? "" : i + 1 == names.size() ? " or " : ", ");
                choices += "\"" + std::string(names[i]) + "\"";
            }
            fail(node->source(), "'" + std::string(key) + "' must be " + choices);
        }
        field = *value;
    } else if constexpr (std::is_same_v<T, std::vector<unsigned>>) {
        field = read_ids(table, key);
    } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
        field = row.list == list_kind::paths  ? read_paths(table, key)
                : row.list == list_kind::keys ? read_keys(table, key)
                                              : read_names(table, key);
    } else {
        static_assert(!sizeof(T), "no reader for this member's type");
    }
}

template <auto... Members, class Section>
bool same_members(const Section& a, const Section& b) {
    return ((a.*Members == b.*Members) && ...);
}

// A row whose key is read into `Member` by its type.
template <auto Member>
constexpr key_row<section_of<Member>> key(std::string_view name, reload_effect reload) {
    key_row<section_of<Member>> row;
    row.name = name;
    row.reload = reload;
    row.read = read_member<Member>;
    row.same = same_members<Member>;
    return row;
}
// An integer or a number of seconds (a double or a duration) from min to max.
template <auto Member>
constexpr key_row<section_of<Member>> number(std::string_view name, double min, double max,
                                             reload_effect reload, bool min_exclusive = false) {
    auto row = key<Member>(name, reload);
    row.min = min;
    row.max = max;
    row.min_exclusive = min_exclusive;
    return row;
}
// A string that `valid` accepts ("'KEY' MUST" otherwise, "{}" in MUST the value).
template <auto Member>
constexpr key_row<section_of<Member>> text(std::string_view name, reload_effect reload,
                                           bool (*valid)(const std::string&) = nullptr,
                                           std::string_view must = {}, bool host = false) {
    auto row = key<Member>(name, reload);
    row.valid = valid;
    row.must = must;
    row.host = host;
    return row;
}
template <auto Member>
constexpr key_row<section_of<Member>> list(std::string_view name, list_kind kind,
                                           reload_effect reload) {
    auto row = key<Member>(name, reload);
    row.list = kind;
    return row;
}
// The row, settable by a flag too: "--max-queue" taking "N" (empty: a switch).
template <class Section>
constexpr key_row<Section> flagged(key_row<Section> row, std::string_view flag,
                                   std::string_view arg, flag_kind kind, std::string_view help,
                                   bool repeats = false) {
    row.flag = {flag, arg, row.name, kind, help, repeats};
    return row;
}

// A key read by code of its own (several members, a default computed from other keys).
template <class Section>
constexpr key_row<Section> custom(std::string_view name, reload_effect reload,
                                  void (*read)(const toml::table&, const key_row<Section>&,
                                               Section&),
                                  bool (*same)(const Section&, const Section&)) {
    key_row<Section> row;
    row.name = name;
    row.reload = reload;
    row.read = read;
    row.same = same;
    return row;
}

// Each row reads its key, in the rows' order (a row may use what an earlier one read).
template <class Section, std::size_t N>
void read_each(const toml::table& table, const std::array<key_row<Section>, N>& rows,
               Section& into) {
    for (const key_row<Section>& row : rows) {
        row.read(table, row, into);
    }
}

template <class Section, std::size_t N>
bool has_row(const std::array<key_row<Section>, N>& rows, std::string_view name) {
    return std::any_of(rows.begin(), rows.end(),
                       [&](const key_row<Section>& row) { return row.name == name; });
}

// Every key of `table` is a row's, else "unknown key 'K' in SECTION".
template <class Known>
void check_known(const toml::table& table, std::string_view section, Known&& known) {
    for (auto&& [key, node] : table) {
        if (!known(key.str())) {
            fail(key.source(),
                 "unknown key '" + std::string(key.str()) + "' in " + std::string(section));
        }
    }
}

// A table that is one section's rows alone.
template <class Section, std::size_t N>
void read_rows(const toml::table& table, const std::array<key_row<Section>, N>& rows,
               std::string_view section, Section& into) {
    check_known(table, section, [&](std::string_view key) { return has_row(rows, key); });
    read_each(table, rows, into);
}

// The first row of `effect` whose members differ between a and b.
template <class Section, std::size_t N>
std::optional<std::string_view> first_changed(const std::array<key_row<Section>, N>& rows,
                                              const Section& a, const Section& b,
                                              reload_effect effect) {
    for (const key_row<Section>& row : rows) {
        if (row.reload == effect && !row.same(a, b)) {
            return row.name;
        }
    }
    return std::nullopt;
}

template <class Section, std::size_t N>
std::vector<std::string_view> names_of(const std::array<key_row<Section>, N>& rows) {
    std::vector<std::string_view> out;
    for (const key_row<Section>& row : rows) {
        out.push_back(row.name);
    }
    return out;
}

} // namespace kpool::config::detail
