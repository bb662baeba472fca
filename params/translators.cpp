// papermill's Translator base class (papermill/translators.py): the rules every language shares;
// each language's own are in languages/<name>.cpp.
#include "params/translators.hpp"

#include <cstdio>
#include <sstream>

namespace kpool::params {

std::string translator::unicode_escape(const std::string& utf8) {
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

std::string translator::replace_all(std::string s, const std::string& from, const std::string& to) {
    for (std::size_t pos = 0; (pos = s.find(from, pos)) != std::string::npos; pos += to.size()) {
        s.replace(pos, from.size(), to);
    }
    return s;
}

std::string translator::quoted(const std::string& s, const std::string& quote_escape) {
    return "\"" + replace_all(unicode_escape(s), "\"", quote_escape) + "\"";
}

bool translator::beyond_int32(const ordered_value& v) {
    return protocol::is_big_integer(v) || v.get<double>() > 2147483647.0 ||
           v.get<double>() < -2147483648.0;
}

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
        return error{errc::bad_request,
                     std::string("a ") + u.what + " parameter cannot be written in " + name()};
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

} // namespace kpool::params
