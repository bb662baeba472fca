// Notebook parameters as papermill reads them: `-p NAME VALUE` typed by papermill's CLI rules,
// `-r NAME VALUE` raw, YAML text (`-y`) and YAML files (`-f`) read the way PyYAML's safe loader
// reads them without timestamps (papermill's NoDatesSafeLoader). Values are JSON; a parameter
// set keeps insertion order, and setting a name again keeps its first place, as a Python dict
// does: that order is the order of the injected assignments.
#pragma once

#include "protocol/python_float.hpp"
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

// papermill's -b: base64 text (standard alphabet, padded) -> the YAML it encodes.
result<std::string> base64_decode(std::string_view text);

// Python's repr of a float (protocol/python_float.hpp), for the parameter translators.
using protocol::python_float_repr;

} // namespace kpool::params
