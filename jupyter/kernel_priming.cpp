// kernel_priming: the priming execute requests per kernel language (measured in bench/first_result.py).
#include "jupyter/kernel_priming.hpp"

#include <algorithm>
#include <cctype>
#include <string>

namespace kpool::jupyter {
namespace {

using json = nlohmann::json;

json execute(std::string_view code, bool silent, json user_expressions = json::object()) {
    return {{"code", std::string(code)},
            {"silent", silent},
            {"store_history", false},
            {"user_expressions", std::move(user_expressions)},
            {"allow_stdin", false},
            {"stop_on_error", false}};
}

std::string lowercase(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

} // namespace

std::vector<json> priming_requests(std::string_view language) {
    const std::string lang = lowercase(language);
    if (lang == "python" || lang == "python3") { // kernel_context.cpp reads both as Python too
        // The cell runs through transform, compile and run_code; formatting the expression's
        // value builds the display formatters (the first cell's largest cost) without an
        // execute_result or `_`.
        return {execute("pass", true, {{"kpool_priming", "None"}})};
    }
    if (lang == "r") {
        // IRkernel's first two visible results each cost several times a later one (its
        // output handlers and IRdisplay's mime bundles), and the third still a little more
        // (measured: first user cell 1.2-1.4x the next after two, 0.9-1.1x after three); with
        // store_history false it does not count them.
        return {execute("1+1", false), execute("1+1", false), execute("1+1", false)};
    }
    // Octave's first execute already costs what later ones do (measured); other languages
    // have no kernel here to measure a priming against, and a kernel that cannot execute
    // must not be kept from warming.
    return {};
}

} // namespace kpool::jupyter
