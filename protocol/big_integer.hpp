// Integers beyond 64 bits, as Python keeps them exactly (papermill's `-p n 123456789012345678901`
// is an int, written as its digits in the injected cell and in the notebook's metadata).
// nlohmann's numbers cannot hold them, so such a value is a JSON *binary* value of subtype
// `big_integer_subtype` whose bytes are its decimal digits, '-' first when negative. The
// parameter translators and kpool's notebook writer print the digits; nothing else is expected
// to meet one (a plain dump would show a binary object, never a wrong number).
#pragma once

#include <nlohmann/json.hpp>

#include <charconv>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace kpool::protocol {

inline constexpr std::uint64_t big_integer_subtype = 0x6b70; // "kp"

// `digits` in `base` (2 to 36, letters in either case; no sign, no underscores) as decimal
// digits without leading zeros ("0" for zero). Empty if a digit is not of the base.
std::string decimal_digits(std::string_view digits, int base);

// decimal * factor + addend, all non-negative decimal digit strings.
std::string decimal_multiply_add(const std::string& decimal, unsigned factor, unsigned addend);

// The value of non-negative `decimal` with `negative` sign: an int64 when it fits, else a
// big integer.
template <class Json>
Json integer_value(const std::string& decimal, bool negative) {
    std::int64_t v = 0;
    const std::string text = (negative ? "-" : "") + decimal;
    auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
    if (ec == std::errc() && end == text.data() + text.size()) {
        return Json(v);
    }
    return Json::binary(typename Json::binary_t::container_type(text.begin(), text.end()),
                        big_integer_subtype);
}

template <class Json>
bool is_big_integer(const Json& v) {
    return v.is_binary() && v.get_binary().has_subtype() &&
           v.get_binary().subtype() == big_integer_subtype;
}

// The digits of a big integer ('-' first when negative).
template <class Json>
std::string big_integer_digits(const Json& v) {
    const auto& bytes = v.get_binary();
    return std::string(bytes.begin(), bytes.end());
}

} // namespace kpool::protocol
