// papermill's translators (papermill/translators.py): the shared rules in the base class, one
// subclass per language with what differs, and the registry.
#include "params/translators.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>

namespace kpool::params {
namespace {

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

// A value the language has no literal for (papermill: NotImplementedError).
struct unsupported {
    std::string what;
};

std::string quoted(const std::string& s, const std::string& quote_escape) {
    return "\"" + replace_all(unicode_escape(s), "\"", quote_escape) + "\"";
}

class python_translator final : public translator {
public:
    const char* name() const override { return "python"; }
    std::optional<std::vector<parameter_info>> inspect(const std::string& source) const override;

protected:
    std::string boolean(bool b) const override { return b ? "True" : "False"; }
    std::string floating(double d) const override {
        if (std::isfinite(d)) {
            return python_float_repr(d);
        }
        return std::isnan(d) ? "float('nan')" : d < 0 ? "float('-inf')" : "float('inf')";
    }
    std::string list(const ordered_value& v) const override { return "[" + join(v, ", ") + "]"; }
    std::string dict(const ordered_value& v) const override {
        return "{" + pairs(v, ", ", [](const std::string& k, const std::string& x) { return k + ": " + x; }) + "}";
    }
    const std::regex& assignment() const override {
        static const std::regex r(R"(^\s*([A-Za-z_]\w*)\s*(:[^=]*)?=[^=])");
        return r;
    }
};

class r_translator final : public translator {
public:
    const char* name() const override { return "R"; }

protected:
    std::string none() const override { return "NULL"; }
    std::string boolean(bool b) const override { return b ? "TRUE" : "FALSE"; }
    std::string list(const ordered_value& v) const override { return "list(" + join(v, ", ") + ")"; }
    std::string dict(const ordered_value& v) const override {
        return "list(" + pairs(v, ", ", [](const std::string& k, const std::string& x) { return k + " = " + x; }) + ")";
    }
    std::string assign(const std::string& name, const std::string& value) const override {
        // Leading '_' is not legal in R names: papermill drops it.
        const auto start = name.find_first_not_of('_');
        return (start == std::string::npos ? std::string() : name.substr(start)) + " = " + value;
    }
    const std::regex& assignment() const override {
        static const std::regex r(R"(^\s*([A-Za-z.][\w.]*)\s*(<-|=[^=]))");
        return r;
    }
};

class scala_translator final : public translator {
public:
    const char* name() const override { return "scala"; }

protected:
    std::string integer(const ordered_value& v) const override {
        const bool beyond_int = protocol::is_big_integer(v) ||
                                v.get<double>() > 2147483647.0 || v.get<double>() < -2147483648.0;
        return integer_text(v) + (beyond_int ? "L" : "");
    }
    std::string list(const ordered_value& v) const override { return "Seq(" + join(v, ", ") + ")"; }
    std::string dict(const ordered_value& v) const override {
        return "Map(" + pairs(v, ", ", [](const std::string& k, const std::string& x) { return k + " -> " + x; }) + ")";
    }
    std::string comment(const std::string& text) const override { return "// " + text; }
    std::string assign(const std::string& name, const std::string& value) const override {
        return "val " + name + " = " + value;
    }
    const std::regex& assignment() const override {
        static const std::regex r(R"(^\s*(?:val|var)\s+([A-Za-z_]\w*))");
        return r;
    }
};

class julia_translator final : public translator {
public:
    const char* name() const override { return "julia"; }

protected:
    std::string none() const override { return "nothing"; }
    std::string list(const ordered_value& v) const override { return "[" + join(v, ", ") + "]"; }
    std::string dict(const ordered_value& v) const override {
        return "Dict(" + pairs(v, ", ", [](const std::string& k, const std::string& x) { return k + " => " + x; }) + ")";
    }
    const std::regex& assignment() const override {
        static const std::regex r(R"(^\s*([A-Za-z_]\w*)\s*=[^=])");
        return r;
    }
};

class matlab_translator final : public translator {
public:
    const char* name() const override { return "matlab"; }

protected:
    std::string none() const override { return "NaN"; }
    std::string str(const std::string& s) const override { return quoted(s, "\"\""); }
    std::string list(const ordered_value& v) const override { return "{" + join(v, ", ") + "}"; }
    std::string dict(const ordered_value& v) const override {
        std::string keys;
        for (const auto& [k, item] : v.items()) { // keys as char arrays
            keys += (keys.empty() ? "'" : ", '") + replace_all(unicode_escape(k), "'", "''") + "'";
        }
        std::string values;
        for (const auto& [k, item] : v.items()) {
            values += (values.empty() ? "" : ", ") + literal(item);
        }
        return "containers.Map({" + keys + "}, {" + values + "})";
    }
    std::string comment(const std::string& text) const override { return "% " + text; }
    std::string line_end() const override { return ";\n"; }
    const std::regex& assignment() const override {
        static const std::regex r(R"(^\s*([A-Za-z_]\w*)\s*=[^=])");
        return r;
    }
};

class bash_translator final : public translator {
public:
    const char* name() const override { return "bash"; }

protected:
    std::string none() const override { return ""; }
    std::string str(const std::string& s) const override { return shell_quote(s); }
    std::string list(const ordered_value& v) const override { return "(" + join(v, " ") + ")"; }
    std::string assign(const std::string& name, const std::string& value) const override {
        return name + "=" + value;
    }
    const std::regex& assignment() const override {
        static const std::regex r(R"(^\s*(?:export\s+)?([A-Za-z_]\w*)=)");
        return r;
    }
};

// papermill's PythonTranslator.inspect: assignments grouped with the lines that continue them
// (comments dropped but on the last line, whose comment is the help), then its pattern.
std::optional<std::vector<parameter_info>> python_translator::inspect(const std::string& source) const {
    static const std::regex pattern(
        R"(^(\w[\w_]*)\s*(:\s*["']?(\w[\w_\[\],\s]*)["']?\s*)?=\s*(.*?)(\s*#\s*(type:\s*([^\s]*)\s*)?(.*))?$)");
    auto trim = [](const std::string& s) {
        const auto b = s.find_first_not_of(" \t\n\r\f\v");
        const auto e = s.find_last_not_of(" \t\n\r\f\v");
        return b == std::string::npos ? std::string() : s.substr(b, e - b + 1);
    };
    auto flatten = [&](const std::vector<std::string>& lines) {
        std::string flat;
        for (std::size_t i = 0; i + 1 < lines.size(); ++i) {
            const auto hash = lines[i].find('#');
            flat += trim(hash == std::string::npos ? lines[i] : lines[i].substr(0, hash));
        }
        if (!lines.empty()) {
            flat += trim(lines.back());
        }
        return flat;
    };
    std::vector<std::string> groups;
    std::vector<std::string> accumulator;
    std::istringstream in(source);
    for (std::string line; std::getline(in, line);) {
        const std::string t = trim(line);
        if (t.empty() || t.starts_with("#")) {
            continue;
        }
        const auto equals = std::count(line.begin(), line.end(), '=');
        if (equals > 0) {
            groups.push_back(flatten(accumulator));
            accumulator.clear();
            if (equals > 1) {
                continue; // papermill: "Unable to parse line"
            }
        }
        accumulator.push_back(line);
    }
    groups.push_back(flatten(accumulator));
    std::vector<parameter_info> found;
    for (const std::string& definition : groups) {
        std::smatch m;
        if (definition.empty() || !std::regex_match(definition, m, pattern)) {
            continue;
        }
        const std::string type = m[3].matched ? m[3].str() : m[7].matched ? m[7].str() : "None";
        found.push_back({trim(m[1].str()), trim(type), trim(m[4].str()), trim(m[8].matched ? m[8].str() : "")});
    }
    return found;
}

// papermill's registry, plus octave (it reads matlab's syntax).
const std::map<std::string, const translator*>& registry() {
    static const python_translator python;
    static const r_translator r;
    static const scala_translator scala;
    static const julia_translator julia;
    static const matlab_translator matlab;
    static const bash_translator bash;
    static const std::map<std::string, const translator*> by_name = {
        {"python", &python}, {"R", &r},          {"scala", &scala},           {"julia", &julia},
        {"matlab", &matlab}, {"octave", &matlab}, {"pysparkkernel", &python}, {"sparkkernel", &scala},
        {"sparkrkernel", &r}, {"bash", &bash}};
    return by_name;
}

} // namespace

std::string translator::literal(const ordered_value& v) const {
    if (v.is_null()) {
        return none();
    }
    if (v.is_string()) {
        return str(v.get<std::string>());
    }
    if (v.is_boolean()) {
        return boolean(v.get<bool>());
    }
    if (v.is_number_integer() || protocol::is_big_integer(v)) {
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

std::string translator::str(const std::string& s) const { return quoted(s, "\\\""); }

std::string translator::list(const ordered_value&) const { throw unsupported{"list"}; }

std::string translator::dict(const ordered_value&) const { throw unsupported{"dict"}; }

std::string translator::join(const ordered_value& items, const std::string& sep) const {
    std::string out;
    for (const auto& item : items) {
        out += (out.empty() ? "" : sep) + literal(item);
    }
    return out;
}

result<std::string> translator::codify(const parameters& values) const {
    std::string content = comment("Parameters") + "\n";
    try {
        for (const auto& [n, value] : values.items()) {
            content += assign(n, literal(value)) + line_end();
        }
    } catch (const unsupported& u) {
        return error{errc::bad_request, std::string("a ") + u.what + " parameter cannot be written in " + name()};
    }
    return content;
}

std::set<std::string> translator::assigned_names(const std::string& source) const {
    std::set<std::string> names;
    std::istringstream lines(source);
    for (std::string line; std::getline(lines, line);) {
        std::smatch m;
        if (std::regex_search(line, m, assignment())) {
            names.insert(m[1].str());
        }
    }
    return names;
}

std::optional<std::vector<parameter_info>> translator::inspect(const std::string&) const {
    return std::nullopt;
}

const translator* translator_for(const std::string& kernel_name, const std::string& language) {
    for (const std::string& key : {kernel_name, language}) {
        if (auto it = registry().find(key); it != registry().end()) {
            return it->second;
        }
    }
    return nullptr;
}

std::string translator_names() {
    std::string names;
    for (const auto& [n, t] : registry()) {
        names += (names.empty() ? "" : ", ") + n;
    }
    return names;
}

} // namespace kpool::params
