// Parameters as code in the notebook's language, papermill's translators rule for rule (without
// the optional Black formatting of Python): python, R, julia, bash, scala, matlab (and octave,
// which reads matlab's syntax). Strings are escaped as Python's unicode_escape does, then quotes
// per language; floats as Python's repr; None as None/NULL/nothing/NaN/'' ...; lists and dicts
// as each language's literals.
#pragma once

#include "params/values.hpp"
#include "protocol/result.hpp"

#include <optional>
#include <set>
#include <string>

namespace kpool::params {

// The translator for a kernel name or language (kernel name first, as papermill looks them up),
// or nothing.
std::optional<std::string> translator_for(const std::string& kernel_name, const std::string& language);

// The injected cell's source: "<comment> Parameters\n" and one assignment per line, in order.
// An error (bad_request) for a value the language cannot take (a dict in bash).
result<std::string> translate_parameters(const std::string& translator, const parameters& values);

// The names a parameters cell assigns, found as papermill's inspection would, for the warning
// about unknown parameters.
std::set<std::string> assigned_names(const std::string& translator, const std::string& source);

} // namespace kpool::params
