// Text that carries what a client sent or what a program holds back to someone: user text made
// safe to repeat in a message, and JSON dumped without throwing on invalid UTF-8. Used by every
// door (the control socket, kpool serve, the CLI), not by the control protocol alone.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace kpool::protocol {

// How much of a client's text an error message repeats back.
inline constexpr std::size_t max_echo_bytes = 128;

// At most max_echo_bytes of user text, control characters replaced, safe to put in a message.
std::string echo_safe(std::string_view user_text);

// JSON text of any value, replacing invalid UTF-8 instead of throwing.
std::string dump_json(const nlohmann::json& j);

// A usage entry: "  LABEL" padded to `column`, then `help`'s lines ('\n' between them), each
// after the first indented to `column`; every line ends with '\n'.
std::string help_lines(std::string_view label, std::string_view help, std::size_t column = 26);

} // namespace kpool::protocol
