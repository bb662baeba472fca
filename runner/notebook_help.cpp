// print_notebook_help: papermill's --help-notebook (inspection.py's display_notebook_help).
#include "runner/notebook_help.hpp"

#include "languages/language.hpp"
#include "notebook/nbformat.hpp"
#include "runner/notebook_files.hpp"
#include "runner/papermill.hpp"

#include <string>

namespace kpool::runner {

using json = nlohmann::json;

int print_notebook_help(const std::string& path, const std::string& kernel,
                        const std::string& language, std::FILE* out, std::FILE* log) {
    auto text = read_notebook_text(path);
    if (!text) {
        std::fprintf(log, "kpool: %s\n", text.err().message.c_str());
        return 2;
    }
    auto parsed = notebook::read_notebook(*text, path == "-" ? "<stdin>" : path);
    if (!parsed) {
        std::fprintf(log, "kpool: %s\n", parsed.err().message.c_str());
        return 2;
    }
    const json& nb = *parsed;
    std::fprintf(out, "Usage: kpool run [OPTIONS] NOTEBOOK_PATH [OUTPUT_PATH]\n");
    std::fprintf(out, "\nParameters inferred for notebook '%s':\n", path.c_str());
    const long at = first_tagged_cell(nb, "parameters");
    if (at < 0) {
        std::fprintf(out, "\n  No cell tagged 'parameters'\n");
        return 1;
    }
    const std::string kernel_name = nb_kernel_name(nb, kernel);
    const std::string lang = nb_language(nb, language, "");
    const params::translator* translator = languages::translator_for(kernel_name, lang);
    if (translator == nullptr) {
        std::fprintf(log, "kpool: no parameter translator for kernel '%s' or language '%s'\n",
                     kernel_name.c_str(), lang.c_str());
        return 2;
    }
    const auto found =
        translator->inspect(nb["cells"][static_cast<std::size_t>(at)].value("source", ""));
    if (!found) {
        std::fprintf(log,
                     "Translator for '%s' language does not support parameter introspection.\n",
                     lang.c_str());
    }
    if (!found || found->empty()) {
        std::fprintf(
            out, "\n  Can't infer anything about this notebook's parameters. It may not have any "
                 "parameter defined.\n");
        return 0;
    }
    for (const params::parameter_info& p : *found) {
        const std::string type =
            p.inferred_type_name == "None" ? "Unknown type" : p.inferred_type_name;
        const std::string definition =
            "  " + p.name + ": " + type + " (default " + p.default_value + ")";
        if (definition.size() > 30) {
            std::fprintf(out, "%s\n", definition.c_str());
            if (!p.help.empty()) {
                std::fprintf(out, "%s%s\n", std::string(34, ' ').c_str(), p.help.c_str());
            }
        } else {
            std::fprintf(out, "%-34s%s\n", definition.c_str(), p.help.c_str());
        }
    }
    return 0;
}

} // namespace kpool::runner
