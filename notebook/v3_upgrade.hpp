// nbformat 3 -> 4, as nbformat.reads(text, as_version=4) converts (nbformat/v4/convert.py's
// upgrade): worksheets flattened into cells, input -> source, prompt_number ->
// execution_count, heading cells -> markdown "# ...", pyout -> execute_result and pyerr -> error
// with short mime keys (text, png, ...) made full, stream's `stream` -> `name`, and
// metadata.orig_nbformat recorded. papermill reads version 3 notebooks this way and runs them.
#pragma once

#include "protocol/result.hpp"

#include <nlohmann/json.hpp>

#include <string>

namespace kpool::notebook {

// `nb` is a parsed version 3 notebook (multiline fields may still be lists); the result is a
// version 4 notebook whose cells have ids (nbformat_minor 5). Errors name `source`.
result<nlohmann::json> upgrade_v3(nlohmann::json nb, const std::string& source);

} // namespace kpool::notebook
