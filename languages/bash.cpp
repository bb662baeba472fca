// bash (bash_kernel; also a kernelspec language "sh"): the translator and the cwd/env snippet.
#include "languages/builtin.hpp"

#include "protocol/text.hpp"

#include <algorithm>
#include <cctype>
#include <regex>

namespace kpool::languages {
namespace {

using params::ordered_value;

// Python's shlex.quote, as papermill's BashTranslator quotes strings.
std::string shlex_quote(const std::string& s) {
    static const std::regex safe(R"([A-Za-z0-9_@%+=:,./-]+)");
    if (s.empty()) {
        return "''";
    }
    if (std::regex_match(s, safe)) {
        return s;
    }
    std::string out = "'";
    for (char c : s) {
        out += c == '\'' ? std::string("'\"'\"'") : std::string(1, c);
    }
    return out + "'";
}

class bash_translator final : public params::translator {
public:
    const char* name() const override { return "bash"; }

protected:
    std::string none() const override { return ""; }
    std::string str(const std::string& s) const override { return shlex_quote(s); }
    std::string list(const ordered_value& v) const override { return "(" + join(v, " ") + ")"; }
    std::string assign(const std::string& name, const std::string& value) const override {
        return name + "=" + value;
    }
    const std::regex& assignment() const override {
        static const std::regex r(R"(^\s*(?:export\s+)?([A-Za-z_]\w*)=)");
        return r;
    }
};

// Single quotes keep everything literal; a quote itself is closed, escaped, reopened.
std::string shell_literal(const std::string& value) {
    std::string out = "'";
    for (char c : value) {
        out += c == '\'' ? std::string("'\\''") : std::string(1, c);
    }
    return out + "'";
}

bool shell_name(const std::string& name) {
    return !name.empty() && !std::isdigit(static_cast<unsigned char>(name[0])) &&
           std::all_of(name.begin(), name.end(), [](char c) {
               return c == '_' || std::isalnum(static_cast<unsigned char>(c));
           });
}

result<std::string> bash_context(const kernel_context& ctx) {
    std::string body;
    if (ctx.cwd) {
        body += "cd -- " + shell_literal(*ctx.cwd);
    }
    for (const auto& [name, value] : ctx.env) {
        if (!shell_name(name)) {
            return error{errc::bad_request, "env name '" + protocol::echo_safe(name) +
                                                "' cannot be exported by a shell"};
        }
        body += (body.empty() ? "" : " && ") + std::string("export ") + name + "=" +
                shell_literal(value);
    }
    return body.empty() ? std::string(":") : body;
}

} // namespace

const language& builtin::bash() {
    static const bash_translator translator;
    static const language row{
        .name = "bash",
        .spec_languages = {"bash", "sh"},
        .translator_keys = {"bash"},
        .translator = &translator,
        .context_code = &bash_context,
    };
    return row;
}

} // namespace kpool::languages
