// The config template's rendering, and the string literal the built-in snippets share.
#include "languages/context.hpp"

#include "protocol/text.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>

namespace kpool::languages {

std::string render_context_snippet(const std::string& snippet_template,
                                   const kernel_context& context) {
    const nlohmann::json value{
        {"cwd", context.cwd ? nlohmann::json(*context.cwd) : nlohmann::json(nullptr)},
        {"env", context.env}};
    // JSON text, then that text as a JSON string: quotes and backslashes escaped, non-ASCII as
    // \u escapes, so the literal is plain ASCII.
    const std::string literal = nlohmann::json(protocol::dump_json(value))
                                    .dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
    std::string code = snippet_template;
    const std::string placeholder = "{context}";
    for (std::size_t pos = 0; (pos = code.find(placeholder, pos)) != std::string::npos;
         pos += literal.size()) {
        code.replace(pos, placeholder.size(), literal);
    }
    return code;
}

std::string c_style_literal(const std::string& value, std::string_view also) {
    std::string out = "\"";
    for (char c : value) {
        const auto u = static_cast<unsigned char>(c);
        if (c == '"' || c == '\\' || also.find(c) != std::string_view::npos) {
            out += '\\';
            out += c;
        } else if (c == '\n') {
            out += "\\n";
        } else if (c == '\t') {
            out += "\\t";
        } else if (c == '\r') {
            out += "\\r";
        } else if (u < 0x20 || u == 0x7f) {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02x", u);
            out += hex;
        } else {
            out += c;
        }
    }
    return out + "\"";
}

} // namespace kpool::languages
