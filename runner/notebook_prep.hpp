// papermill's preparation of a loaded notebook before its cells run, shared by `kpool run` and
// kpool serve's POST /v1/run: the parameters translated for the kernel and language and
// injected, metadata.papermill filled in, inputs hidden in report mode, and the error marker
// cells of an earlier run removed.
#pragma once

#include "params/values.hpp"
#include "protocol/result.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kpool::runner {

struct prep_options {
    std::string kernel_name; // the kernelspec the parameters are written for
    std::string language;    // papermill's nb_language, already resolved
    params::parameters parameters = params::parameters::object();
    std::string input_path; // recorded in metadata.papermill
    std::string output_path;
    nlohmann::json environment = nlohmann::json::object(); // the --env ones, recorded
    bool report_mode = false;
};

// Prepares `nb` (as load_notebook left it) in place; the warnings papermill would log ("Passed
// unknown parameter: x", no parameters cell), or why it cannot (no translator for the
// language, a value the language cannot hold).
result<std::vector<std::string>> prepare_notebook(nlohmann::json& nb, const prep_options& options);

} // namespace kpool::runner
