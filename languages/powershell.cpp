// PowerShell (.NET Interactive's .net-powershell kernel): papermill's PowershellTranslator. No
// cwd/env snippet or priming: no .NET kernel is packaged for Debian to test one against.
#include "languages/builtin.hpp"

#include <cmath>

namespace kpool::languages {
namespace {

using params::ordered_value;

class powershell_translator final : public params::translator {
public:
    const char* name() const override { return ".net-powershell"; }

protected:
    std::string none() const override { return "$Null"; }
    std::string boolean(bool b) const override { return b ? "$True" : "$False"; }
    std::string floating(double d) const override {
        if (std::isfinite(d)) {
            return params::python_float_repr(d);
        }
        return std::isnan(d) ? "[double]::NaN"
               : d < 0       ? "[double]::NegativeInfinity"
                             : "[double]::PositiveInfinity";
    }
    std::string str(const std::string& s) const override { return quoted(s, "`\""); }
    std::string list(const ordered_value& v) const override { return "@(" + join(v, ", ") + ")"; }
    std::string dict(const ordered_value& v) const override {
        return "@{" +
               pairs(v, "\n ",
                     [](const std::string& k, const std::string& x) { return k + " = " + x; }) +
               "}";
    }
    std::string assign(const std::string& name, const std::string& value) const override {
        return "$" + name + " = " + value;
    }
    const std::regex& assignment() const override {
        static const std::regex r(R"(^\s*\$([A-Za-z_]\w*)\s*=[^=])");
        return r;
    }
};

} // namespace

const language& builtin::powershell() {
    static const powershell_translator translator;
    static const language row{
        .name = "PowerShell",
        .spec_languages = {"powershell"},
        .translator_keys = {".net-powershell"},
        .translator = &translator,
    };
    return row;
}

} // namespace kpool::languages
