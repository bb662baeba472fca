// JSON read as Python's json module reads it: NaN, Infinity and -Infinity are numbers (Python
// writes them, and so papermill writes `-p x nan` into a notebook's metadata), and an integer has
// no size limit (beyond 64 bits a big integer, protocol/big_integer.hpp, where nlohmann would
// round it to a double). Everything else is strict JSON, as nlohmann parses it. And the way back
// for big integers: to_json_text.
#pragma once

#include "protocol/big_integer.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kpool::protocol {

// `text` with each NaN, Infinity and -Infinity outside strings, and each float too large for a
// double (Python's inf), replaced by a number literal of the same length (so parse errors keep
// their positions), and for each one replaced, its place among the number tokens of the text and
// the value it stands for. `text` stays empty when nothing was replaced (the input is then parsed
// as it is).
struct python_constants {
    std::string text;
    std::vector<std::pair<std::size_t, double>> replaced; // ascending places
};
python_constants replace_python_constants(std::string_view text);

namespace detail {

// nlohmann's DOM builder, with numbers taken as Python takes them.
template <class Json>
class python_json_sax : public nlohmann::detail::json_sax_dom_parser<Json> {
    using base = nlohmann::detail::json_sax_dom_parser<Json>;

public:
    python_json_sax(Json& into, const std::vector<std::pair<std::size_t, double>>& replaced,
                    bool exceptions)
        : base(into, exceptions), m_replaced(replaced) {}

    // The stand-ins are all floats ("0.0", "1.000000", ...): an integer token is only counted.
    bool number_integer(typename Json::number_integer_t v) {
        ++m_numbers;
        return base::number_integer(v);
    }
    bool number_unsigned(typename Json::number_unsigned_t v) {
        ++m_numbers;
        return base::number_unsigned(v);
    }
    bool number_float(typename Json::number_float_t v, const typename Json::string_t& raw) {
        if (replaced_here()) {
            return base::number_float(m_value, raw);
        }
        if (raw.find_first_of(".eE") == std::string::npos) { // an integer beyond 64 bits
            const bool negative = !raw.empty() && raw[0] == '-';
            Json big = integer_value<Json>(raw.substr(negative ? 1 : 0), negative);
            return base::binary(big.get_binary());
        }
        return base::number_float(v, raw);
    }

private:
    // Whether the number token now read is one replace_python_constants put there.
    bool replaced_here() {
        const std::size_t place = m_numbers++;
        if (m_next < m_replaced.size() && m_replaced[m_next].first == place) {
            m_value = m_replaced[m_next++].second;
            return true;
        }
        return false;
    }

    const std::vector<std::pair<std::size_t, double>>& m_replaced;
    std::size_t m_numbers = 0;
    std::size_t m_next = 0;
    double m_value = 0;
};

} // namespace detail

// Parses `text` as Python's json.loads would. Throws Json::parse_error as Json::parse does.
template <class Json>
Json parse_python_json(std::string_view text) {
    python_constants prepared = replace_python_constants(text);
    Json root;
    detail::python_json_sax<Json> sax(root, prepared.replaced, true);
    if (prepared.replaced.empty()) {
        Json::sax_parse(text, &sax);
    } else {
        Json::sax_parse(prepared.text, &sax);
    }
    return root;
}

// The same, without exceptions: a discarded value (is_discarded()) for text that is not JSON.
template <class Json>
Json parse_python_json_or_discarded(std::string_view text) {
    try {
        return parse_python_json<Json>(text);
    } catch (const typename Json::exception&) { // parse_error, or out_of_range for a number
        return Json(Json::value_t::discarded);
    }
}

// nlohmann's dump (invalid UTF-8 replaced; `indent` as dump's, -1 for one line), except that a
// big integer is written as its digits, as Python's json writes an int, where dump would write
// a binary object. NaN and infinities stay null, as dump writes them: strict JSON.
template <class Json>
bool holds_big_integer(const Json& v) {
    if (v.is_object() || v.is_array()) {
        for (const Json& item : v) {
            if (holds_big_integer(item)) {
                return true;
            }
        }
        return false;
    }
    return is_big_integer(v);
}

template <class Json>
std::string to_json_text(const Json& j, int indent = -1) {
    if (!holds_big_integer(j)) {
        return j.dump(indent, ' ', false, Json::error_handler_t::replace);
    }
    std::string out;
    auto write = [&](auto& self, const Json& v, int depth) -> void {
        auto newline = [&](int d) {
            if (indent >= 0) {
                out += '\n';
                out.append(static_cast<std::size_t>(indent * d), ' ');
            }
        };
        if (is_big_integer(v)) {
            out += big_integer_digits(v);
        } else if ((v.is_object() || v.is_array()) && !v.empty()) {
            out += v.is_object() ? '{' : '[';
            bool first = true;
            for (auto it = v.begin(); it != v.end(); ++it) {
                out += first ? "" : ",";
                first = false;
                newline(depth + 1);
                if (v.is_object()) {
                    out += Json(it.key()).dump(-1, ' ', false, Json::error_handler_t::replace);
                    out += indent >= 0 ? ": " : ":";
                }
                self(self, *it, depth + 1);
            }
            newline(depth);
            out += v.is_object() ? '}' : ']';
        } else {
            out += v.dump(-1, ' ', false, Json::error_handler_t::replace);
        }
    };
    write(write, j, 0);
    return out;
}

} // namespace kpool::protocol
