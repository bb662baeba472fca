// libFuzzer target: papermill's parameter readers on arbitrary bytes (YAML as -y/-f/-b give it,
// and one -p value), then every language's translator on what they read. Crashes, sanitizer
// reports and exceptions escaping are failures; errors are fine (bad input gets an error).
#include "languages/language.hpp"
#include "params/values.hpp"

#include <cstdint>
#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace kpool::params;
    const std::string text(reinterpret_cast<const char*>(data), size);
    parameters values = parameters::object();
    if (auto yaml = parse_yaml_parameters(text, "fuzz.yaml")) {
        values = std::move(*yaml);
    }
    values["p"] = resolve_cli_value(text);
    if (auto decoded = base64_decode(text)) {
        (void)parse_yaml_parameters(*decoded, "fuzz.b64");
    }
    for (const char* language : {"python", "R", "julia", "scala", "matlab", "bash", ".net-csharp",
                                 ".net-fsharp", ".net-powershell"}) {
        if (const translator* t = kpool::languages::translator_for(language, "")) {
            (void)t->codify(values);
        }
    }
    return 0;
}
