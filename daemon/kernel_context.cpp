// Built-in cwd/env snippets and their rendering.
#include "daemon/kernel_context.hpp"

#include "protocol/control.hpp"

#include <nlohmann/json.hpp>

namespace kpool::daemon {

std::optional<std::string> builtin_context_snippet(const std::string& language) {
    if (language == "python" || language == "python3") {
        // One expression, so nothing is left in the user's namespace.
        return R"((lambda os, ctx: (ctx["cwd"] is None or os.chdir(ctx["cwd"]), )"
               R"(os.environ.update(ctx["env"])))(__import__("os"), )"
               R"(__import__("json").loads({context})))";
    }
    return std::nullopt;
}

std::string render_context_snippet(const std::string& snippet_template,
                                   const std::optional<std::string>& cwd,
                                   const std::map<std::string, std::string>& env) {
    const nlohmann::json context{{"cwd", cwd ? nlohmann::json(*cwd) : nlohmann::json(nullptr)},
                                 {"env", env}};
    // JSON text, then that text as a JSON string: quotes and backslashes escaped, non-ASCII as
    // \u escapes, so the literal is plain ASCII.
    const std::string literal =
        nlohmann::json(protocol::dump_json(context)).dump(-1, ' ', true,
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
