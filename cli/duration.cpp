// parse_duration: a number, then an optional unit (ms, s, m, h).
#include "cli/duration.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>

namespace kpool::cli {

std::optional<duration_text> parse_duration(const std::string& text, bare_unit bare,
                                            bool allow_zero) {
    if (text.empty() ||
        !(std::isdigit(static_cast<unsigned char>(text.front())) || text.front() == '.')) {
        return std::nullopt; // no sign, no "inf", no leading space
    }
    char* end = nullptr;
    const double number = std::strtod(text.c_str(), &end);
    const std::string unit(end);
    double ms_per = 0;
    if (unit.empty()) {
        ms_per = bare == bare_unit::milliseconds ? 1 : 1000;
    } else if (unit == "ms") {
        ms_per = 1;
    } else if (unit == "s") {
        ms_per = 1000;
    } else if (unit == "m") {
        ms_per = 60'000;
    } else if (unit == "h") {
        ms_per = 3'600'000;
    } else {
        return std::nullopt;
    }
    const double ms = number * ms_per;
    if (!std::isfinite(ms) || ms > 365.0 * 86'400'000 || (ms <= 0 && !(allow_zero && ms == 0))) {
        return std::nullopt;
    }
    // Whole milliseconds, never rounded down to 0 from a positive value.
    const auto whole = static_cast<std::int64_t>(std::ceil(ms));
    return duration_text{std::chrono::milliseconds(whole), unit.empty()};
}

std::string duration_usage(const std::string& option, const std::string& text, bare_unit bare) {
    return option + " takes a duration such as 500ms, 5s, 1.5m or 2h (a bare number is " +
           (bare == bare_unit::milliseconds ? "milliseconds" : "seconds") + "), not '" + text + "'";
}

} // namespace kpool::cli
