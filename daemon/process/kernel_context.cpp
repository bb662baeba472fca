// Built-in cwd/env snippets, one per language family, and the config template's rendering.
#include "daemon/process/kernel_context.hpp"

#include "protocol/control.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstdio>

namespace kpool::daemon {
namespace {

std::string lower(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return s;
}

// A double-quoted literal with C-style escapes: backslash, the quote, control characters as
// \n, \t, \r or \xHH (R, Julia and Octave all read these); `also` lists characters the language
// treats specially inside such strings (Julia's '$'). UTF-8 passes through: kernels read code as
// UTF-8.
std::string c_style_literal(const std::string& value, std::string_view also = {}) {
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

// bash: single quotes keep everything literal; a quote itself is closed, escaped, reopened.
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

// One expression, so nothing is left in the user's namespace. Paths and values go in as UTF-8
// bytes: an embedded interpreter (xeus-python) in the C locale has an ASCII filesystem
// encoding and would refuse them as str. os.environb shares os.environ's data.
constexpr const char* python_template =
    R"((lambda os, ctx: (ctx["cwd"] is None or os.chdir(ctx["cwd"].encode()), )"
    R"([os.environb.__setitem__(k.encode(), v.encode()) for k, v in ctx["env"].items()]))()"
    R"(__import__("os"), __import__("json").loads({context})))";

std::string r_code(const kernel_context& ctx) {
    std::string body;
    if (ctx.cwd) {
        body += "setwd(" + c_style_literal(*ctx.cwd) + "); ";
    }
    if (!ctx.env.empty()) {
        std::string args;
        for (const auto& [name, value] : ctx.env) {
            args += (args.empty() ? "" : ", ") + c_style_literal(name) + " = " + c_style_literal(value);
        }
        body += "Sys.setenv(" + args + "); ";
    }
    // local(): no names left behind; invisible(): no value printed.
    return "invisible(local({ " + body + "NULL }))";
}

std::string julia_code(const kernel_context& ctx) {
    std::string body;
    if (ctx.cwd) {
        body += "cd(" + c_style_literal(*ctx.cwd, "$") + "); ";
    }
    for (const auto& [name, value] : ctx.env) {
        body += "ENV[" + c_style_literal(name, "$") + "] = " + c_style_literal(value, "$") + "; ";
    }
    return "let; " + body + "nothing; end";
}

std::string matlab_code(const kernel_context& ctx) {
    std::string body;
    if (ctx.cwd) {
        body += "cd(" + c_style_literal(*ctx.cwd) + "); ";
    }
    for (const auto& [name, value] : ctx.env) {
        body += "setenv(" + c_style_literal(name) + ", " + c_style_literal(value) + "); ";
    }
    return body;
}

result<std::string> bash_code(const kernel_context& ctx) {
    std::string body;
    if (ctx.cwd) {
        body += "cd -- " + shell_literal(*ctx.cwd);
    }
    for (const auto& [name, value] : ctx.env) {
        if (!shell_name(name)) {
            return error{errc::bad_request, "env name '" + protocol::echo_safe(name) +
                                                "' cannot be exported by a shell"};
        }
        body += (body.empty() ? "" : " && ") + std::string("export ") + name + "=" + shell_literal(value);
    }
    return body.empty() ? std::string(":") : body;
}

// By syntax: Octave reads MATLAB's, as the parameter translators have it.
enum class family { python, r, julia, matlab, bash, none };

family family_of(const std::string& language) {
    const std::string l = lower(language);
    if (l == "python" || l == "python3") {
        return family::python;
    }
    if (l == "r") {
        return family::r;
    }
    if (l == "julia") {
        return family::julia;
    }
    if (l == "octave" || l == "matlab") {
        return family::matlab;
    }
    if (l == "bash" || l == "sh") {
        return family::bash;
    }
    return family::none;
}

} // namespace

const char* const memory_history_python = R"(
try:
    from IPython import get_ipython
    from IPython.core.history import HistoryManager
    ip = get_ipython()
except ImportError:
    ip = None
old = getattr(ip, "history_manager", None)
if old is not None and old.hist_file != ":memory:":
    if getattr(old, "save_thread", None) is not None:
        old.save_thread.stop()
    try:
        with old.db:
            old.db.execute("DELETE FROM sessions WHERE session = ?", (old.session_number,))
        old.db.close()
    except Exception:
        pass
    if old in ip.configurables:
        ip.configurables.remove(old)
    new = HistoryManager(shell=ip, parent=ip, hist_file=":memory:")
    ip.configurables.append(new)
    ip.history_manager = new
    names = {"_ih": new.input_hist_parsed, "In": new.input_hist_parsed, "_oh": new.output_hist,
             "Out": new.output_hist, "_dh": new.dir_hist}
    ip.user_ns.update(names)
    ip.user_ns_hidden.update(names)
)";

bool may_have_ipython_history(const std::string& language) { return family_of(language) == family::python; }

bool has_builtin_context_snippet(const std::string& language) {
    return family_of(language) != family::none;
}

result<std::string> builtin_context_code(const std::string& language, const kernel_context& context) {
    switch (family_of(language)) {
    case family::python: {
        std::string code = render_context_snippet(python_template, context);
        if (context.memory_history) {
            // After the cwd, so that the new _dh starts there; exec in a dict of its own leaves
            // nothing in the user's namespace.
            code += "\nexec(" + nlohmann::json(std::string(memory_history_python)).dump() + ", {})";
        }
        return code;
    }
    case family::r: return r_code(context);
    case family::julia: return julia_code(context);
    case family::matlab: return matlab_code(context);
    case family::bash: return bash_code(context);
    case family::none: break;
    }
    return error{errc::bad_request, "kpool has no cwd/env snippet for language '" +
                                        protocol::echo_safe(language) + "'"};
}

std::string render_context_snippet(const std::string& snippet_template, const kernel_context& context) {
    const nlohmann::json value{
        {"cwd", context.cwd ? nlohmann::json(*context.cwd) : nlohmann::json(nullptr)},
        {"env", context.env}};
    // JSON text, then that text as a JSON string: quotes and backslashes escaped, non-ASCII as
    // \u escapes, so the literal is plain ASCII.
    const std::string literal =
        nlohmann::json(protocol::dump_json(value)).dump(-1, ' ', true,
                                                        nlohmann::json::error_handler_t::replace);
    std::string code = snippet_template;
    const std::string placeholder = "{context}";
    for (std::size_t pos = 0; (pos = code.find(placeholder, pos)) != std::string::npos;
         pos += literal.size()) {
        code.replace(pos, placeholder.size(), literal);
    }
    return code;
}

} // namespace kpool::daemon
