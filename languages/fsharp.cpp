// F# (.NET Interactive's .net-fsharp kernel): papermill's FSharpTranslator. No cwd/env snippet
// or priming: no .NET kernel is packaged for Debian to test one against.
#include "languages/builtin.hpp"

namespace kpool::languages {
namespace {

using params::ordered_value;

class fsharp_translator final : public params::translator {
public:
    const char* name() const override { return ".net-fsharp"; }

protected:
    std::string integer(const ordered_value& v) const override {
        return integer_text(v) + (beyond_int32(v) ? "L" : "");
    }
    std::string list(const ordered_value& v) const override { return "[ " + join(v, "; ") + " ]"; }
    std::string dict(const ordered_value& v) const override {
        return "[ " +
               pairs(v, "; ",
                     [](const std::string& k, const std::string& x) {
                         return "(" + k + ", " + x + " :> IComparable)";
                     }) +
               " ] |> Map.ofList";
    }
    std::string comment(const std::string& text) const override { return "(* " + text + " *)"; }
    std::string assign(const std::string& name, const std::string& value) const override {
        return "let " + name + " = " + value;
    }
    const std::regex& assignment() const override {
        static const std::regex r(R"(^\s*let\s+(?:mutable\s+)?([A-Za-z_]\w*))");
        return r;
    }
};

} // namespace

const language& builtin::fsharp() {
    static const fsharp_translator translator;
    static const language row{
        .name = "F#",
        .spec_languages = {"f#"},
        .translator_keys = {".net-fsharp"},
        .translator = &translator,
    };
    return row;
}

} // namespace kpool::languages
