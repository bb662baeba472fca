// Human-readable renderings of kpoold's replies for the kpool CLI.
#pragma once

#include <nlohmann/json.hpp>

#include <string>

namespace kpool::client {

// A status reply as a summary line, a table of pools and a table of kernels.
std::string format_status(const nlohmann::json& status);

// A kernelspecs reply as a table.
std::string format_kernelspecs(const nlohmann::json& reply);

} // namespace kpool::client
