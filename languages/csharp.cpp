// C# (.NET Interactive's .net-csharp kernel): papermill's CSharpTranslator. No cwd/env snippet
// or priming: no .NET kernel is packaged for Debian to test one against.
#include "languages/builtin.hpp"

namespace kpool::languages {
namespace {

using params::ordered_value;

class csharp_translator final : public params::translator {
public:
    const char* name() const override { return ".net-csharp"; }

protected:
    // papermill: "Option type not implemented for C#."
    std::string none() const override { throw unsupported{"None"}; }
    std::string integer(const ordered_value& v) const override {
        return integer_text(v) + (beyond_int32(v) ? "L" : "");
    }
    std::string list(const ordered_value& v) const override {
        return "new [] { " + join(v, ", ") + " }";
    }
    std::string dict(const ordered_value& v) const override {
        return "new Dictionary<string,Object>{ " +
               pairs(v, ", ",
                     [](const std::string& k, const std::string& x) {
                         return "{ " + k + " , " + x + " }";
                     }) +
               " }";
    }
    std::string comment(const std::string& text) const override { return "// " + text; }
    std::string assign(const std::string& name, const std::string& value) const override {
        return "var " + name + " = " + value + ";";
    }
    const std::regex& assignment() const override {
        static const std::regex r(R"(^\s*(?:var\s+)?([A-Za-z_]\w*)\s*=[^=])");
        return r;
    }
};

} // namespace

const language& builtin::csharp() {
    static const csharp_translator translator;
    static const language row{
        .name = "C#",
        .spec_languages = {"c#"},
        .translator_keys = {".net-csharp"},
        .translator = &translator,
    };
    return row;
}

} // namespace kpool::languages
