// Notebook parameters as papermill reads them: `-p NAME VALUE` typed by papermill's CLI rules,
// `-r NAME VALUE` raw, YAML text (`-y`) and YAML files (`-f`) read the way PyYAML's safe loader
// reads them without timestamps (papermill's NoDatesSafeLoader). Values are JSON; a parameter
// set keeps insertion order, and setting a name again keeps its first place, as a Python dict
// does: that order is the order of the injected assignments.
#pragma once

#include "protocol/result.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace kpool::params {

using parameters = nlohmann::ordered_json; // an object

// papermill's _resolve_type: "True"/"False" -> bool, "None" -> null, an int, a float
// (including nan and inf), else the string itself.
nlohmann::ordered_json resolve_cli_value(const std::string& text);

// YAML text holding a mapping (or nothing: an empty set) -> its parameters. Errors name
// `source` and the line:col, or say that the document is not a mapping.
result<parameters> parse_yaml_parameters(std::string_view text, const std::string& source);

// Python's repr of a float: shortest round trip, scientific below 1e-4 and from 1e16 on,
// ".0" on integral values, "nan"/"inf"/"-inf".
std::string python_float_repr(double value);

} // namespace kpool::params
