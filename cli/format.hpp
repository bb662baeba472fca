// Human-readable renderings of kpoold's replies for the kpool CLI.
#pragma once

#include <nlohmann/json.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kpool::cli {

// A status line's most columns by default (`kpool status --wide` has them all).
inline constexpr std::size_t status_width = 100;

// A status reply as a summary line, a table of pools and a table of kernels. Not `wide`: the
// pool table keeps the columns an operator reads first (the rest are in --wide and --json), and
// each pool's detail lines are wrapped at status_width.
std::string format_status(const nlohmann::json& status, bool wide = false);

// One daemon of several: its status reply, or why there is none.
struct daemon_status {
    std::string endpoint;
    std::optional<nlohmann::json> status;
    std::string error;
};
// Several daemons' statuses as one summary line each, one table of pools and one of kernels,
// with a HOST column (the daemon's host, else its endpoint).
std::string format_statuses(const std::vector<daemon_status>& daemons, bool wide = false);

// A kernelspecs reply as a table.
std::string format_kernelspecs(const nlohmann::json& reply);

} // namespace kpool::cli
