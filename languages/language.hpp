// A kernel language: everything kpool knows of one, in one row. papermill's parameter translator
// (kpool run), the snippet that applies a client's cwd and env inside a warm kernel (kpoold),
// and the priming executes that pay a kernel's first-use set-up before it counts as warm.
//
// Each language's row is made in a file of its own (languages/<name>.cpp) and listed once in
// registry.cpp: a new language is that file and its line. The rows are looked up by what a
// caller has: papermill looks a translator up by kernel name, then by language, in its own
// registry's exact spelling ("R", "pysparkkernel"); kpoold knows a kernelspec's "language"
// (any case: "Python", "python3").
#pragma once

#include "languages/context.hpp"
#include "params/translators.hpp"
#include "protocol/result.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace kpool::languages {

struct language {
    std::string_view name; // the language as errors and docs name it
    // The kernelspec "language" values it answers, lower case.
    std::vector<std::string_view> spec_languages;
    // papermill's translator registry names it answers (kernel names or languages, exact case).
    std::vector<std::string_view> translator_keys;
    // papermill's translator; nullptr where papermill has none either.
    const params::translator* translator = nullptr;
    // The code applying a cwd and env; nullptr: the pool's config needs a context_snippet.
    result<std::string> (*context_code)(const kernel_context&) = nullptr;
    // The execute_request contents to send, in order, before the kernel counts as warm
    // (store_history false, so none is seen by the user); nullptr: none.
    std::vector<nlohmann::json> (*priming)() = nullptr;
    // Its kernels may have IPython's history (kernel_context::memory_history applies).
    bool ipython_history = false;
    // The kernels (kernel_info's `implementation`) that surely abort the execute_requests
    // queued behind one that raised with stop_on_error, so that a notebook's next cells may
    // wait at the kernel while one runs (runner/cell_pipeline). By implementation, not
    // language: ipykernel aborts what arrives within a window abort_window_expression widens;
    // xeus-python and IRkernel abort only what has arrived when the error is sent, with no
    // window to widen, so a cell sent just before an error could still run there.
    std::vector<std::string_view> aborting_implementations = {};
    // A user expression (evaluated after a cell that ran without error, in its reply) that
    // makes such a kernel abort requests sent before an error and arriving after it; empty:
    // none needed. Until a reply says it was evaluated, cells go one at a time.
    std::string_view abort_window_expression = {};
};

// Every row, in registry.cpp's order.
const std::vector<const language*>& all();

// The row of a kernelspec's language (any case), or nullptr.
const language* for_kernelspec(std::string_view spec_language);

// papermill's lookup: the translator for a kernel name, else for a language, or nullptr.
const params::translator* translator_for(const std::string& kernel_name,
                                         const std::string& language);
// papermill's registry names kpool answers, sorted, for an error message.
std::string translator_names();

// Whether a kernelspec's language has a built-in cwd/env snippet.
bool has_builtin_context_snippet(std::string_view spec_language);
// That snippet applying `context`; an error for a language without one, or a value the
// language cannot take (an env name bash cannot export).
result<std::string> builtin_context_code(std::string_view spec_language,
                                         const kernel_context& context);
// Whether kernels of that language may have IPython's history (Python ones: ipykernel; in
// others, such as xeus-python, the history code finds no IPython shell and does nothing).
bool may_have_ipython_history(std::string_view spec_language);
// An execute_request's content that leaves no trace: store_history false (no history entry, no
// execution count: the user's first cell is still In[1]) and, silent, no execute_input or
// execute_result on iopub. Priming, startup_code and kpoold's setup code are sent so.
nlohmann::json traceless_execute(std::string_view code, bool silent = true,
                                 nlohmann::json user_expressions = nlohmann::json::object());

// The priming execute_request contents for that language (none for most).
std::vector<nlohmann::json> priming_requests(std::string_view spec_language);

} // namespace kpool::languages
