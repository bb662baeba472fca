// Julia (IJulia): its translator and its cwd/env snippet. No priming: there was no Julia kernel
// here to measure one against (a pool's startup_code can prime it).
#include "languages/builtin.hpp"

namespace kpool::languages {
namespace {

using params::ordered_value;

class julia_translator final : public params::translator {
public:
    const char* name() const override { return "julia"; }

protected:
    std::string none() const override { return "nothing"; }
    std::string list(const ordered_value& v) const override { return "[" + join(v, ", ") + "]"; }
    std::string dict(const ordered_value& v) const override {
        return "Dict(" +
               pairs(v, ", ",
                     [](const std::string& k, const std::string& x) { return k + " => " + x; }) +
               ")";
    }
    const std::regex& assignment() const override {
        static const std::regex r(R"(^\s*([A-Za-z_]\w*)\s*=[^=])");
        return r;
    }
};

result<std::string> julia_context(const kernel_context& ctx) {
    std::string body;
    if (ctx.cwd) {
        body += "cd(" + c_style_literal(*ctx.cwd, "$") + "); ";
    }
    for (const auto& [name, value] : ctx.env) {
        body += "ENV[" + c_style_literal(name, "$") + "] = " + c_style_literal(value, "$") + "; ";
    }
    return "let; " + body + "nothing; end";
}

} // namespace

const language& builtin::julia() {
    static const julia_translator translator;
    static const language row{
        .name = "Julia",
        .spec_languages = {"julia"},
        .translator_keys = {"julia"},
        .translator = &translator,
        .context_code = &julia_context,
    };
    return row;
}

} // namespace kpool::languages
