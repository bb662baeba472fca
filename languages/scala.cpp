// Scala (papermill's sparkkernel, e.g. almond): the translator only; its kernels need a pool
// `context_snippet` for cwd/env (there was no Scala kernel here to test a built-in one against).
#include "languages/builtin.hpp"

namespace kpool::languages {
namespace {

using params::ordered_value;

class scala_translator final : public params::translator {
public:
    const char* name() const override { return "scala"; }

protected:
    std::string integer(const ordered_value& v) const override {
        return integer_text(v) + (beyond_int32(v) ? "L" : "");
    }
    std::string list(const ordered_value& v) const override { return "Seq(" + join(v, ", ") + ")"; }
    std::string dict(const ordered_value& v) const override {
        return "Map(" +
               pairs(v, ", ",
                     [](const std::string& k, const std::string& x) { return k + " -> " + x; }) +
               ")";
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

} // namespace

const language& builtin::scala() {
    static const scala_translator translator;
    static const language row{
        .name = "Scala",
        .spec_languages = {"scala"},
        .translator_keys = {"scala", "sparkkernel"},
        .translator = &translator,
    };
    return row;
}

} // namespace kpool::languages
