// The Jupyter wire protocol (messaging spec v5.3): building and parsing signed multipart messages.
//
// A message on the wire is [identities..., "<IDS|MSG>", hmac, header, parent_header, metadata,
// content, buffers...], the hmac being HMAC-SHA256 over the four JSON frames. Pure code: frames
// in, frames out; the daemon owns the sockets.
#pragma once

#include "protocol/result.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>
#include <vector>

namespace kpool::protocol {

inline constexpr std::string_view wire_delimiter = "<IDS|MSG>";
inline constexpr std::string_view wire_protocol_version = "5.3";

struct wire_message {
    std::vector<std::string> identities;
    nlohmann::json header = nlohmann::json::object();
    nlohmann::json parent_header = nlohmann::json::object();
    nlohmann::json metadata = nlohmann::json::object();
    nlohmann::json content = nlohmann::json::object();
    std::vector<std::string> buffers;

    std::string msg_type() const;
    std::string msg_id() const;
    std::string parent_msg_id() const;
};

// A fresh header: unique msg_id, the given session, ISO 8601 UTC date, version 5.3.
nlohmann::json make_header(std::string_view msg_type, std::string_view session);

// A new message of the given type, with a fresh header and the given content.
wire_message make_message(std::string_view msg_type, std::string_view session,
                          nlohmann::json content = nlohmann::json::object());

// Frames ready to send; an empty key leaves the signature empty (unsigned sessions).
std::vector<std::string> serialize(const wire_message& msg, std::string_view key);

// Parses frames and verifies the signature (when key is non-empty). Errors are bad_request.
result<wire_message> parse(const std::vector<std::string>& frames, std::string_view key);

// `text` without ANSI escape sequences (CSI ... final byte): IPython colours its tracebacks,
// and files, pipes and logs want plain text.
std::string strip_ansi(const std::string& text);

// An error's traceback (a JSON array of lines, as error outputs and replies carry it) as text,
// one line each, ANSI colours removed unless `keep_colour`. Non-string items are skipped.
std::string traceback_text(const nlohmann::json& traceback, bool keep_colour = false);

} // namespace kpool::protocol
