// MATLAB and Octave (matlab_kernel, octave_kernel; Octave reads MATLAB's syntax): the
// translator and the cwd/env snippet. No priming: octave_kernel's first execute already costs
// what its later ones do (measured).
#include "languages/builtin.hpp"

namespace kpool::languages {
namespace {

using params::ordered_value;

class matlab_translator final : public params::translator {
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

result<std::string> matlab_context(const kernel_context& ctx) {
    std::string body;
    if (ctx.cwd) {
        body += "cd(" + c_style_literal(*ctx.cwd) + "); ";
    }
    for (const auto& [name, value] : ctx.env) {
        body += "setenv(" + c_style_literal(name) + ", " + c_style_literal(value) + "); ";
    }
    return body;
}

} // namespace

const language& builtin::matlab() {
    static const matlab_translator translator;
    static const language row{
        .name = "MATLAB/Octave",
        .spec_languages = {"octave", "matlab"},
        .translator_keys = {"matlab", "octave"},
        .translator = &translator,
        .context_code = &matlab_context,
    };
    return row;
}

} // namespace kpool::languages
