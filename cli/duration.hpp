// Durations on the command line, one syntax for every command: a number with its unit (500ms,
// 5s, 1.5m, 2h), or a bare number in the option's historical unit (milliseconds for `kpool
// acquire --timeout`, seconds everywhere else), so scripts written before units still work.
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace kpool::cli {

enum class bare_unit { milliseconds, seconds };

struct duration_text {
    std::chrono::milliseconds value{0};
    bool bare = false; // no unit was written
};

// nullopt: not a duration (the caller says why, naming its option). Negative values, NaN and
// more than a year are not durations. `allow_zero`: 0 (in any unit) is one.
std::optional<duration_text> parse_duration(const std::string& text, bare_unit bare,
                                            bool allow_zero = false);

// What a usage error says about `option`'s value.
std::string duration_usage(const std::string& option, const std::string& text, bare_unit bare);

} // namespace kpool::cli
