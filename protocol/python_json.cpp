// python_json: the pass that lets nlohmann's strict lexer read Python's NaN and Infinity, and
// floats beyond a double's range (nlohmann refuses them; Python reads them as infinities).
#include "protocol/python_json.hpp"

#include <cctype>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>

namespace kpool::protocol {
namespace {

bool number_char(char c) {
    return std::isdigit(static_cast<unsigned char>(c)) || c == '-' || c == '+' || c == '.' ||
           c == 'e' || c == 'E';
}

// A word that touches a letter, digit or number sign on either side is not Python's constant
// ("NaN1", "1NaN", "NaNa" stay invalid JSON rather than becoming a number).
bool stands_alone(std::string_view text, std::size_t at, std::size_t length) {
    auto joins = [](char c) {
        return number_char(c) || std::isalnum(static_cast<unsigned char>(c)) || c == '_';
    };
    return (at == 0 || !joins(text[at - 1])) &&
           (at + length == text.size() || !joins(text[at + length]));
}

// A JSON number (RFC 8259's grammar, exactly) too large for a double: its infinity; else 0.
double overflowing_float(std::string_view token) {
    std::size_t i = token.starts_with('-') ? 1 : 0;
    auto digits = [&] {
        const std::size_t from = i;
        while (i < token.size() && std::isdigit(static_cast<unsigned char>(token[i]))) {
            ++i;
        }
        return i - from;
    };
    const std::size_t whole = i;
    if (digits() == 0 || (token[whole] == '0' && i - whole > 1)) {
        return 0;
    }
    bool fraction_or_exponent = false;
    if (i < token.size() && token[i] == '.') {
        ++i;
        if (digits() == 0) {
            return 0;
        }
        fraction_or_exponent = true;
    }
    if (i < token.size() && (token[i] == 'e' || token[i] == 'E')) {
        ++i;
        if (i < token.size() && (token[i] == '+' || token[i] == '-')) {
            ++i;
        }
        if (digits() == 0) {
            return 0;
        }
        fraction_or_exponent = true;
    }
    if (i != token.size() || !fraction_or_exponent) { // not a number, or an integer (exact anyway)
        return 0;
    }
    const double v = std::strtod(std::string(token).c_str(), nullptr);
    return std::isinf(v) ? v : 0;
}

} // namespace

python_constants replace_python_constants(std::string_view text) {
    struct constant {
        std::string_view word;
        std::string_view stand_in; // a JSON number of the same length
        double value;
    };
    static constexpr double inf = std::numeric_limits<double>::infinity();
    static const constant constants[] = {{"NaN", "0.0", std::numeric_limits<double>::quiet_NaN()},
                                         {"Infinity", "1.000000", inf},
                                         {"-Infinity", "-1.000000", -inf}};
    python_constants out;
    std::size_t numbers = 0;
    std::size_t i = 0;
    while (i < text.size()) {
        const char c = text[i];
        if (c == '"') { // a string: nothing inside it is a token
            for (++i; i < text.size() && text[i] != '"'; ++i) {
                if (text[i] == '\\') {
                    ++i;
                }
            }
            ++i;
            continue;
        }
        bool matched = false;
        for (const constant& k : constants) {
            if (text.substr(i, k.word.size()) == k.word && stands_alone(text, i, k.word.size())) {
                if (out.text.empty()) {
                    out.text.assign(text);
                }
                out.text.replace(i, k.word.size(), k.stand_in);
                out.replaced.emplace_back(numbers++, k.value);
                i += k.word.size();
                matched = true;
                break;
            }
        }
        if (matched) {
            continue;
        }
        if (c == '-' || std::isdigit(static_cast<unsigned char>(c))) { // a number token
            const std::size_t start = i;
            while (i < text.size() && number_char(text[i])) {
                ++i;
            }
            const std::string_view token = text.substr(start, i - start);
            if (const double v = overflowing_float(token); v != 0) { // Python reads 1e400 as inf
                if (out.text.empty()) {
                    out.text.assign(text);
                }
                std::string stand_in = token[0] == '-' ? "-0." : "0."; // finite, and as long
                stand_in.resize(token.size(), '0');
                out.text.replace(start, token.size(), stand_in);
                out.replaced.emplace_back(numbers, v);
            }
            ++numbers;
            continue;
        }
        ++i;
    }
    return out;
}

} // namespace kpool::protocol
