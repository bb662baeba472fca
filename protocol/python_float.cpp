// python_float_repr: std::to_chars's shortest round trip, laid out as Python's float_repr_style.
#include "protocol/python_float.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace kpool::protocol {

std::string python_float_repr(double value) {
    if (std::isnan(value)) {
        return "nan";
    }
    if (std::isinf(value)) {
        return value < 0 ? "-inf" : "inf";
    }
    char buf[64];
    // The shortest digits that round-trip, in scientific form: d.ddde[+-]X.
    auto [end, ec] = std::to_chars(buf, buf + sizeof buf, value, std::chars_format::scientific);
    std::string sci(buf, end);
    const auto e = sci.find('e');
    std::string mantissa = sci.substr(0, e);
    const int exponent = std::stoi(sci.substr(e + 1));
    const bool negative = mantissa[0] == '-';
    std::string digits;
    for (char c : mantissa) {
        if (c >= '0' && c <= '9') {
            digits += c;
        }
    }
    std::string out = negative ? "-" : "";
    if (exponent < -4 || exponent >= 16) {
        out += digits.substr(0, 1);
        if (digits.size() > 1) {
            out += "." + digits.substr(1);
        }
        char exp[16];
        std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
        return out + exp;
    }
    if (exponent < 0) {
        return out + "0." + std::string(static_cast<std::size_t>(-exponent - 1), '0') + digits;
    }
    const auto point = static_cast<std::size_t>(exponent) + 1;
    if (digits.size() <= point) {
        return out + digits + std::string(point - digits.size(), '0') + ".0";
    }
    return out + digits.substr(0, point) + "." + digits.substr(point);
}

} // namespace kpool::protocol
