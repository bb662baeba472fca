// Parameter values: CLI typing, YAML with PyYAML's implicit types, Python's float repr.
#include "params/values.hpp"

#include "protocol/big_integer.hpp"

#include <sodium.h>

#include <yaml-cpp/yaml.h>

#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <regex>

namespace kpool::params {
namespace {

using ojson = nlohmann::ordered_json;

std::string strip(const std::string& s) {
    const auto first = s.find_first_not_of(" \t\n\r\f\v");
    if (first == std::string::npos) {
        return {};
    }
    return s.substr(first, s.find_last_not_of(" \t\n\r\f\v") - first + 1);
}

// Python's int(): optional sign, digits with single underscores between them, spaces around;
// exact at any size (beyond 64 bits a big integer, protocol/big_integer.hpp).
std::optional<ojson> python_int(const std::string& text) {
    static const std::regex pattern(R"([+-]?[0-9]+(_[0-9]+)*)");
    std::string s = strip(text);
    if (!std::regex_match(s, pattern)) {
        return std::nullopt;
    }
    std::erase(s, '_');
    const bool signed_ = s[0] == '-' || s[0] == '+';
    return protocol::integer_value<ojson>(
        protocol::decimal_digits(std::string_view(s).substr(signed_ ? 1 : 0), 10), s[0] == '-');
}

// Python's float(): decimal or scientific (underscores between digits), nan, inf, infinity.
bool python_float(const std::string& text, double& out) {
    static const std::regex number(
        R"([+-]?(([0-9]+(_[0-9]+)*)(\.([0-9]+(_[0-9]+)*)?)?|\.[0-9]+(_[0-9]+)*)([eE][+-]?[0-9]+(_[0-9]+)*)?)");
    static const std::regex special(R"([+-]?(nan|inf|infinity))", std::regex::icase);
    std::string s = strip(text);
    if (std::regex_match(s, special)) {
        const bool negative = s[0] == '-';
        const char first = static_cast<char>(
            std::tolower(static_cast<unsigned char>(s[s[0] == '-' || s[0] == '+' ? 1 : 0])));
        out = first == 'n' ? std::nan("") : (negative ? -HUGE_VAL : HUGE_VAL);
        return true;
    }
    if (!std::regex_match(s, number)) {
        return false;
    }
    std::erase(s, '_');
    out = std::strtod(s.c_str(), nullptr);
    return true;
}

// PyYAML's implicit resolvers (YAML 1.1) for a plain scalar, timestamps left as strings.
ojson resolve_plain_scalar(const std::string& s) {
    static const std::regex null_re(R"(~|null|Null|NULL|)");
    static const std::regex bool_true(R"(yes|Yes|YES|true|True|TRUE|on|On|ON)");
    static const std::regex bool_false(R"(no|No|NO|false|False|FALSE|off|Off|OFF)");
    static const std::regex int_dec(R"([-+]?(0|[1-9][0-9_]*))");
    static const std::regex int_bin(R"([-+]?0b[0-1_]+)");
    static const std::regex int_oct(R"([-+]?0[0-7_]+)");
    static const std::regex int_hex(R"([-+]?0x[0-9a-fA-F_]+)");
    static const std::regex float_re(
        R"([-+]?([0-9][0-9_]*)\.[0-9_]*([eE][-+][0-9]+)?|\.[0-9_]+([eE][-+][0-9]+)?)");
    static const std::regex inf_re(R"([-+]?\.(inf|Inf|INF))");
    static const std::regex nan_re(R"(\.(nan|NaN|NAN))");
    // YAML 1.1's base 60: 1:30 is 90, 1:30.5 is 90.5.
    static const std::regex int_sexagesimal(R"([-+]?[1-9][0-9_]*(:[0-5]?[0-9])+)");
    static const std::regex float_sexagesimal(R"([-+]?[0-9][0-9_]*(:[0-5]?[0-9])+\.[0-9_]*)");
    if (std::regex_match(s, null_re)) {
        return nullptr;
    }
    if (std::regex_match(s, bool_true)) {
        return true;
    }
    if (std::regex_match(s, bool_false)) {
        return false;
    }
    auto integer = [&](int base, std::size_t prefix) -> ojson {
        std::string digits = s;
        std::erase(digits, '_');
        const bool negative = digits[0] == '-';
        const std::size_t skip = (digits[0] == '-' || digits[0] == '+' ? 1 : 0) + prefix;
        const std::string decimal = protocol::decimal_digits(
            std::string_view(digits).substr(std::min(skip, digits.size())), base);
        if (decimal.empty()) {
            return s; // no digits after the prefix: not a number after all
        }
        return protocol::integer_value<ojson>(decimal, negative);
    };
    if (std::regex_match(s, int_bin)) {
        return integer(2, 2);
    }
    if (std::regex_match(s, int_hex)) {
        return integer(16, 2);
    }
    if (std::regex_match(s, int_dec)) {
        return integer(10, 0);
    }
    if (std::regex_match(s, int_oct)) {
        return integer(8, 1);
    }
    if (std::regex_match(s, int_sexagesimal) || std::regex_match(s, float_sexagesimal)) {
        // PyYAML: the parts as base-60 digits, the last one possibly with a fraction.
        std::string digits = s;
        std::erase(digits, '_');
        const bool negative = digits[0] == '-';
        double value = 0;
        std::string whole = "0"; // decimal digits: the first part may be of any length
        std::size_t start = digits[0] == '-' || digits[0] == '+' ? 1 : 0;
        bool is_float = false;
        for (std::size_t pos = start; pos <= digits.size();) {
            const std::size_t colon = std::min(digits.find(':', pos), digits.size());
            const std::string part = digits.substr(pos, colon - pos);
            value = value * 60 + std::strtod(part.c_str(), nullptr);
            if (part.find('.') != std::string::npos) {
                is_float = true;
            } else if (pos == start) {
                whole = protocol::decimal_digits(part, 10);
            } else { // later parts are 0-59 (the pattern says so)
                whole = protocol::decimal_multiply_add(whole, 60,
                                                       static_cast<unsigned>(std::stoi(part)));
            }
            pos = colon + 1;
        }
        if (is_float) {
            return negative ? -value : value;
        }
        return protocol::integer_value<ojson>(whole, negative);
    }
    if (std::regex_match(s, inf_re)) {
        return s[0] == '-' ? -HUGE_VAL : HUGE_VAL;
    }
    if (std::regex_match(s, nan_re)) {
        return std::nan("");
    }
    if (std::regex_match(s, float_re)) {
        std::string digits = s;
        std::erase(digits, '_');
        return std::strtod(digits.c_str(), nullptr);
    }
    return s;
}

ojson from_yaml(const YAML::Node& node) {
    switch (node.Type()) {
    case YAML::NodeType::Null: return nullptr;
    case YAML::NodeType::Scalar: {
        // A quoted scalar (tag "!") or one tagged !!str is a string; a plain one is typed by its
        // text, and one tagged !!int, !!float, !!bool or !!null as that tag says.
        const std::string& tag = node.Tag();
        if (tag == "!" || tag == "tag:yaml.org,2002:str") {
            return node.Scalar();
        }
        ojson v = resolve_plain_scalar(node.Scalar());
        const bool integer = v.is_number_integer() || protocol::is_big_integer(v);
        if ((tag == "tag:yaml.org,2002:int" && !integer) ||
            (tag == "tag:yaml.org,2002:float" && !v.is_number() && !integer) ||
            (tag == "tag:yaml.org,2002:bool" && !v.is_boolean()) ||
            (tag == "tag:yaml.org,2002:null" && !v.is_null())) {
            throw YAML::RepresentationException(node.Mark(), "'" + node.Scalar() + "' is not a " +
                                                                 tag.substr(18));
        }
        if (tag == "tag:yaml.org,2002:float" && v.is_number_integer()) {
            return static_cast<double>(v.get<long long>());
        }
        if (tag == "tag:yaml.org,2002:float" && protocol::is_big_integer(v)) {
            return std::strtod(protocol::big_integer_digits(v).c_str(), nullptr);
        }
        return v;
    }
    case YAML::NodeType::Sequence: {
        ojson out = ojson::array();
        for (const auto& item : node) {
            out.push_back(from_yaml(item));
        }
        return out;
    }
    case YAML::NodeType::Map: {
        ojson out = ojson::object();
        for (const auto& item : node) {
            out[item.first.as<std::string>()] = from_yaml(item.second);
        }
        return out;
    }
    case YAML::NodeType::Undefined: break;
    }
    return nullptr;
}

} // namespace

ojson resolve_cli_value(const std::string& text) {
    if (text == "True") {
        return true;
    }
    if (text == "False") {
        return false;
    }
    if (text == "None") {
        return nullptr;
    }
    if (auto i = python_int(text)) {
        return *i;
    }
    double f = 0;
    if (python_float(text, f)) {
        return f;
    }
    return text;
}

result<parameters> parse_yaml_parameters(std::string_view text, const std::string& source) {
    try {
        const YAML::Node root = YAML::Load(std::string(text));
        if (root.IsNull() || !root.IsDefined()) {
            return parameters::object();
        }
        if (!root.IsMap()) {
            return error{errc::bad_request,
                         source + ": parameters must be a YAML mapping of names to values"};
        }
        return from_yaml(root);
    } catch (const YAML::Exception& e) {
        return error{errc::bad_request, source + ":" + std::to_string(e.mark.line + 1) + ":" +
                                            std::to_string(e.mark.column + 1) + ": " + e.msg};
    }
}

result<std::string> base64_decode(std::string_view text) {
    std::string out(text.size() / 4 * 3 + 3, '\0');
    std::size_t length = 0;
    const char* end = nullptr;
    if (sodium_base642bin(reinterpret_cast<unsigned char*>(out.data()), out.size(), text.data(),
                          text.size(), " \t\r\n", &length, &end,
                          sodium_base64_VARIANT_ORIGINAL) != 0 ||
        end != text.data() + text.size()) {
        return error{errc::bad_request, "not valid base64 (standard alphabet, with padding)"};
    }
    out.resize(length);
    return out;
}

} // namespace kpool::params
