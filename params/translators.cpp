// papermill's translators (papermill/translators.py), one family of literals per language.
#include "params/translators.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <regex>
#include <sstream>

namespace kpool::params {
namespace {

using ojson = nlohmann::ordered_json;

// Python's str.encode("unicode_escape").decode(): backslash, \t, \n, \r escaped, printable
// ASCII kept, every other code point as \xhh, \uhhhh or \Uhhhhhhhh. Quotes are left alone.
std::string unicode_escape(const std::string& utf8) {
    std::string out;
    for (std::size_t i = 0; i < utf8.size();) {
        const auto c = static_cast<unsigned char>(utf8[i]);
        std::uint32_t cp = c;
        std::size_t len = 1;
        if (c >= 0xF0 && i + 3 < utf8.size()) {
            cp = ((c & 0x07u) << 18) | ((static_cast<unsigned char>(utf8[i + 1]) & 0x3Fu) << 12) |
                 ((static_cast<unsigned char>(utf8[i + 2]) & 0x3Fu) << 6) |
                 (static_cast<unsigned char>(utf8[i + 3]) & 0x3Fu);
            len = 4;
        } else if (c >= 0xE0 && i + 2 < utf8.size()) {
            cp = ((c & 0x0Fu) << 12) | ((static_cast<unsigned char>(utf8[i + 1]) & 0x3Fu) << 6) |
                 (static_cast<unsigned char>(utf8[i + 2]) & 0x3Fu);
            len = 3;
        } else if (c >= 0xC0 && i + 1 < utf8.size()) {
            cp = ((c & 0x1Fu) << 6) | (static_cast<unsigned char>(utf8[i + 1]) & 0x3Fu);
            len = 2;
        }
        i += len;
        char buf[16];
        if (cp == '\\') {
            out += "\\\\";
        } else if (cp == '\t') {
            out += "\\t";
        } else if (cp == '\n') {
            out += "\\n";
        } else if (cp == '\r') {
            out += "\\r";
        } else if (cp >= 0x20 && cp < 0x7f) {
            out += static_cast<char>(cp);
        } else if (cp < 0x100) {
            std::snprintf(buf, sizeof buf, "\\x%02x", cp);
            out += buf;
        } else if (cp < 0x10000) {
            std::snprintf(buf, sizeof buf, "\\u%04x", cp);
            out += buf;
        } else {
            std::snprintf(buf, sizeof buf, "\\U%08x", cp);
            out += buf;
        }
    }
    return out;
}

std::string replace_all(std::string s, const std::string& from, const std::string& to) {
    for (std::size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
        s.replace(pos, from.size(), to);
    }
    return s;
}

// Python's shlex.quote.
std::string shell_quote(const std::string& s) {
    static const std::regex safe(R"([A-Za-z0-9_@%+=:,./-]+)");
    if (s.empty()) {
        return "''";
    }
    if (std::regex_match(s, safe)) {
        return s;
    }
    return "'" + replace_all(s, "'", "'\"'\"'") + "'";
}

struct unsupported {
    std::string what;
};

class translator {
public:
    explicit translator(std::string lang) : m_lang(std::move(lang)) {}

    std::string value(const ojson& v) const {
        if (v.is_null()) {
            return none();
        }
        if (v.is_string()) {
            return str(v.get<std::string>());
        }
        if (v.is_boolean()) {
            return boolean(v.get<bool>());
        }
        if (v.is_number_integer()) {
            return integer(v);
        }
        if (v.is_number_float()) {
            return floating(v.get<double>());
        }
        if (v.is_object()) {
            return dict(v);
        }
        if (v.is_array()) {
            return list(v);
        }
        return str(v.dump());
    }

    std::string comment(const std::string& text) const {
        if (m_lang == "scala") {
            return "// " + text;
        }
        if (m_lang == "matlab") {
            return "% " + text;
        }
        return "# " + text;
    }

    std::string assign(std::string name, const std::string& val) const {
        if (m_lang == "R") {
            name.erase(0, name.find_first_not_of('_')); // leading '_' is not legal in R names
            return name + " = " + val;
        }
        if (m_lang == "scala") {
            return "val " + name + " = " + val;
        }
        if (m_lang == "bash") {
            return name + "=" + val;
        }
        return name + " = " + val;
    }

    std::string line_end() const { return m_lang == "matlab" ? ";\n" : "\n"; }

private:
    std::string none() const {
        if (m_lang == "R") return "NULL";
        if (m_lang == "julia") return "nothing";
        if (m_lang == "matlab") return "NaN";
        if (m_lang == "bash") return "";
        return "None"; // python, and scala (papermill writes Python's str(None) there)
    }
    std::string boolean(bool b) const {
        if (m_lang == "python") return b ? "True" : "False";
        if (m_lang == "R") return b ? "TRUE" : "FALSE";
        return b ? "true" : "false";
    }
    std::string integer(const ojson& v) const {
        const std::string text = v.dump();
        if (m_lang == "scala") {
            const double d = v.get<double>();
            if (d > 2147483647.0 || d < -2147483648.0) {
                return text + "L";
            }
        }
        return text;
    }
    std::string floating(double d) const {
        if (m_lang == "python" && !std::isfinite(d)) {
            return std::isnan(d) ? "float('nan')" : d < 0 ? "float('-inf')" : "float('inf')";
        }
        return python_float_repr(d);
    }
    std::string str(const std::string& s) const {
        if (m_lang == "bash") {
            return shell_quote(s);
        }
        if (m_lang == "matlab") {
            return "\"" + replace_all(unicode_escape(s), "\"", "\"\"") + "\"";
        }
        return "\"" + replace_all(unicode_escape(s), "\"", "\\\"") + "\"";
    }
    std::string char_array(const std::string& s) const { // matlab dict keys
        return "'" + replace_all(unicode_escape(s), "'", "''") + "'";
    }
    std::string join(const ojson& items, const std::string& sep) const {
        std::string out;
        for (const auto& item : items) {
            out += (out.empty() ? "" : sep) + value(item);
        }
        return out;
    }
    std::string list(const ojson& v) const {
        if (m_lang == "R") return "list(" + join(v, ", ") + ")";
        if (m_lang == "scala") return "Seq(" + join(v, ", ") + ")";
        if (m_lang == "matlab") return "{" + join(v, ", ") + "}";
        if (m_lang == "bash") return "(" + join(v, " ") + ")";
        return "[" + join(v, ", ") + "]"; // python, julia
    }
    std::string dict(const ojson& v) const {
        std::string pairs;
        std::string keys;
        std::string vals;
        for (const auto& [k, item] : v.items()) {
            const std::string sep = pairs.empty() ? "" : ", ";
            if (m_lang == "python") pairs += sep + str(k) + ": " + value(item);
            else if (m_lang == "R") pairs += sep + str(k) + " = " + value(item);
            else if (m_lang == "scala") pairs += sep + str(k) + " -> " + value(item);
            else if (m_lang == "julia") pairs += sep + str(k) + " => " + value(item);
            else if (m_lang == "matlab") {
                keys += (keys.empty() ? "" : ", ") + char_array(k);
                vals += (vals.empty() ? "" : ", ") + value(item);
                pairs += sep; // only to count
            } else {
                throw unsupported{"dict"};
            }
        }
        if (m_lang == "python") return "{" + pairs + "}";
        if (m_lang == "R") return "list(" + pairs + ")";
        if (m_lang == "scala") return "Map(" + pairs + ")";
        if (m_lang == "julia") return "Dict(" + pairs + ")";
        return "containers.Map({" + keys + "}, {" + vals + "})"; // matlab
    }

    std::string m_lang;
};

} // namespace

std::optional<std::string> translator_for(const std::string& kernel_name, const std::string& language) {
    // papermill's registry, plus octave (it reads matlab's syntax).
    static const std::map<std::string, std::string> registry = {
        {"python", "python"},       {"R", "R"},         {"scala", "scala"},
        {"julia", "julia"},         {"matlab", "matlab"}, {"octave", "matlab"},
        {"pysparkkernel", "python"}, {"sparkkernel", "scala"}, {"sparkrkernel", "R"},
        {"bash", "bash"}};
    for (const std::string& key : {kernel_name, language}) {
        if (auto it = registry.find(key); it != registry.end()) {
            return it->second;
        }
    }
    return std::nullopt;
}

result<std::string> translate_parameters(const std::string& lang, const parameters& values) {
    const translator t(lang);
    std::string content = t.comment("Parameters") + "\n";
    try {
        for (const auto& [name, value] : values.items()) {
            content += t.assign(name, t.value(value)) + t.line_end();
        }
    } catch (const unsupported& u) {
        return error{errc::bad_request, "a " + u.what + " parameter cannot be written in " + lang};
    }
    return content;
}

std::set<std::string> assigned_names(const std::string& lang, const std::string& source) {
    static const std::map<std::string, std::regex> patterns = {
        {"python", std::regex(R"(^\s*([A-Za-z_]\w*)\s*(:[^=]*)?=[^=])")},
        {"R", std::regex(R"(^\s*([A-Za-z.][\w.]*)\s*(<-|=[^=]))")},
        {"julia", std::regex(R"(^\s*([A-Za-z_]\w*)\s*=[^=])")},
        {"matlab", std::regex(R"(^\s*([A-Za-z_]\w*)\s*=[^=])")},
        {"bash", std::regex(R"(^\s*(?:export\s+)?([A-Za-z_]\w*)=)")},
        {"scala", std::regex(R"(^\s*(?:val|var)\s+([A-Za-z_]\w*))")},
    };
    std::set<std::string> names;
    auto it = patterns.find(lang);
    if (it == patterns.end()) {
        return names;
    }
    std::istringstream lines(source);
    for (std::string line; std::getline(lines, line);) {
        std::smatch m;
        if (std::regex_search(line, m, it->second)) {
            names.insert(m[1].str());
        }
    }
    return names;
}

} // namespace kpool::params
