// big_integer: base conversion and the one arithmetic step YAML's base 60 needs, on decimal
// strings.
#include "protocol/big_integer.hpp"

#include <algorithm>
#include <cctype>

namespace kpool::protocol {

std::string decimal_multiply_add(const std::string& decimal, unsigned factor, unsigned addend) {
    std::string out;
    unsigned long long carry = addend;
    for (auto it = decimal.rbegin(); it != decimal.rend(); ++it) {
        const unsigned long long x = static_cast<unsigned long long>(*it - '0') * factor + carry;
        out.push_back(static_cast<char>('0' + x % 10));
        carry = x / 10;
    }
    for (; carry != 0; carry /= 10) {
        out.push_back(static_cast<char>('0' + carry % 10));
    }
    while (out.size() > 1 && out.back() == '0') {
        out.pop_back();
    }
    std::reverse(out.begin(), out.end());
    return out.empty() ? "0" : out;
}

std::string decimal_digits(std::string_view digits, int base) {
    std::string decimal = "0";
    for (const char c : digits) {
        const int lower = std::tolower(static_cast<unsigned char>(c));
        const int d = std::isdigit(lower)              ? lower - '0'
                      : (lower >= 'a' && lower <= 'z') ? lower - 'a' + 10
                                                       : 99;
        if (d >= base) {
            return {};
        }
        decimal =
            decimal_multiply_add(decimal, static_cast<unsigned>(base), static_cast<unsigned>(d));
    }
    return digits.empty() ? std::string() : decimal;
}

} // namespace kpool::protocol
