// protocol/text.hpp's helpers.
#include "protocol/text.hpp"

#include <algorithm>

namespace kpool::protocol {

std::string dump_json(const nlohmann::json& j) {
    return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string echo_safe(std::string_view user_text) {
    std::string out;
    const std::size_t n = std::min(user_text.size(), max_echo_bytes);
    out.reserve(n + 3);
    for (std::size_t i = 0; i < n; ++i) {
        const auto c = static_cast<unsigned char>(user_text[i]);
        out.push_back(c < 0x20 || c == 0x7f ? '?' : static_cast<char>(c));
    }
    if (user_text.size() > n) {
        out += "...";
    }
    return out; // invalid UTF-8 left here is replaced when the reply is dumped
}

std::string help_lines(std::string_view label, std::string_view help, std::size_t column) {
    std::string line = "  " + std::string(label);
    line.resize(std::max(line.size() + 2, column), ' ');
    std::string out;
    for (std::size_t at = 0; at <= help.size();) {
        const std::size_t end = std::min(help.find('\n', at), help.size());
        out += line + std::string(help.substr(at, end - at)) + "\n";
        line.assign(column, ' ');
        at = end + 1;
    }
    return out;
}

} // namespace kpool::protocol
