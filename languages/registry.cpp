// The language table: every row, and the lookups by kernelspec language and papermill name.
#include "languages/builtin.hpp"
#include "languages/language.hpp"

#include "protocol/text.hpp"

#include <algorithm>
#include <cctype>
#include <set>

namespace kpool::languages {
namespace {

std::string lower(std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
}

} // namespace

nlohmann::json traceless_execute(std::string_view code, bool silent,
                                 nlohmann::json user_expressions) {
    return {{"code", std::string(code)}, {"silent", silent},
            {"store_history", false},    {"user_expressions", std::move(user_expressions)},
            {"allow_stdin", false},      {"stop_on_error", false}};
}

const std::vector<const language*>& all() {
    // Listed, not self-registered: a static library drops an object file nothing refers to,
    // and its registration with it.
    static const std::vector<const language*> rows = {
        &builtin::python(), &builtin::r(),      &builtin::julia(),
        &builtin::matlab(), &builtin::bash(),   &builtin::scala(),
        &builtin::csharp(), &builtin::fsharp(), &builtin::powershell(),
    };
    return rows;
}

const language* for_kernelspec(std::string_view spec_language) {
    const std::string wanted = lower(spec_language);
    for (const language* row : all()) {
        if (std::find(row->spec_languages.begin(), row->spec_languages.end(), wanted) !=
            row->spec_languages.end()) {
            return row;
        }
    }
    return nullptr;
}

const params::translator* translator_for(const std::string& kernel_name,
                                         const std::string& language) {
    for (const std::string& key : {kernel_name, language}) {
        for (const auto* row : all()) {
            const auto& keys = row->translator_keys;
            if (row->translator != nullptr &&
                std::find(keys.begin(), keys.end(), key) != keys.end()) {
                return row->translator;
            }
        }
    }
    return nullptr;
}

std::string translator_names() {
    std::set<std::string_view> names;
    for (const auto* row : all()) {
        if (row->translator != nullptr) {
            names.insert(row->translator_keys.begin(), row->translator_keys.end());
        }
    }
    std::string out;
    for (const auto name : names) {
        out += (out.empty() ? "" : ", ") + std::string(name);
    }
    return out;
}

bool has_builtin_context_snippet(std::string_view spec_language) {
    const language* row = for_kernelspec(spec_language);
    return row != nullptr && row->context_code != nullptr;
}

result<std::string> builtin_context_code(std::string_view spec_language,
                                         const kernel_context& context) {
    const language* row = for_kernelspec(spec_language);
    if (row == nullptr || row->context_code == nullptr) {
        return error{errc::bad_request, "kpool has no cwd/env snippet for language '" +
                                            protocol::echo_safe(std::string(spec_language)) + "'"};
    }
    return row->context_code(context);
}

bool may_have_ipython_history(std::string_view spec_language) {
    const language* row = for_kernelspec(spec_language);
    return row != nullptr && row->ipython_history;
}

std::vector<nlohmann::json> priming_requests(std::string_view spec_language) {
    const language* row = for_kernelspec(spec_language);
    return row != nullptr && row->priming != nullptr ? row->priming()
                                                     : std::vector<nlohmann::json>{};
}

} // namespace kpool::languages
