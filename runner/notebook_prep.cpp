// prepare_notebook: parameters, metadata, report mode, stale markers: in papermill's order.
#include "runner/notebook_prep.hpp"

#include "kpool/version.hpp"
#include "languages/language.hpp"
#include "runner/papermill.hpp"

#include <set>

namespace kpool::runner {

result<std::vector<std::string>> prepare_notebook(json& nb, const prep_options& options) {
    std::vector<std::string> warnings;
    if (!options.parameters.empty()) {
        const params::translator* translator =
            languages::translator_for(options.kernel_name, options.language);
        if (translator == nullptr) {
            return error{errc::bad_request, "kpool has no parameter translator for kernel '" +
                                                options.kernel_name + "' or language '" +
                                                options.language + "' (it has " +
                                                languages::translator_names() + ")"};
        }
        auto source = translator->codify(options.parameters);
        if (!source) {
            return source.err();
        }
        const long declared = first_tagged_cell(nb, "parameters");
        const auto known =
            declared >= 0 ? translator->assigned_names(
                                nb["cells"][static_cast<std::size_t>(declared)].value("source", ""))
                          : std::set<std::string>{};
        for (const auto& [name, value] : options.parameters.items()) {
            if (known.count(name) == 0) {
                warnings.push_back("Passed unknown parameter: " + name);
            }
        }
        inject_parameters(nb, *source, warnings);
    }
    prepare_metadata(nb, options.input_path, options.output_path, options.parameters,
                     options.environment, std::string("kpool ") + kpool::version);
    if (options.report_mode) {
        hide_inputs(nb);
    }
    remove_error_markers(nb);
    return warnings;
}

} // namespace kpool::runner
