// Jupyter wire messages: serialize with an HMAC signature, parse and verify.
#include "protocol/wire.hpp"

#include "protocol/hmac.hpp"
#include "protocol/python_json.hpp"
#include "protocol/stamps.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>

namespace kpool::protocol {
namespace {

using json = nlohmann::json;

std::string dump(const json& j) {
    return to_json_text(j);
} // a big integer read from a message stays one

std::string string_field(const json& obj, const char* key) {
    if (!obj.is_object()) {
        return {};
    }
    auto it = obj.find(key);
    return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string{};
}

error malformed(std::string message) { return {errc::bad_request, std::move(message)}; }

} // namespace

std::string wire_message::msg_type() const { return string_field(header, "msg_type"); }
std::string wire_message::msg_id() const { return string_field(header, "msg_id"); }
std::string wire_message::parent_msg_id() const { return string_field(parent_header, "msg_id"); }

json make_header(std::string_view msg_type, std::string_view session) {
    return json{{"msg_id", random_hex(16)}, {"session", session},
                {"username", "kpool"},      {"date", iso8601_now()},
                {"msg_type", msg_type},     {"version", wire_protocol_version}};
}

wire_message make_message(std::string_view msg_type, std::string_view session, json content) {
    wire_message msg;
    msg.header = make_header(msg_type, session);
    msg.content = std::move(content);
    return msg;
}

std::vector<std::string> serialize(const wire_message& msg, std::string_view key) {
    std::vector<std::string> frames = msg.identities;
    std::string header = dump(msg.header);
    std::string parent = dump(msg.parent_header);
    std::string metadata = dump(msg.metadata);
    std::string content = dump(msg.content);
    frames.emplace_back(wire_delimiter);
    frames.push_back(key.empty() ? std::string{}
                                 : hmac_sha256_hex(key, {header, parent, metadata, content}));
    frames.push_back(std::move(header));
    frames.push_back(std::move(parent));
    frames.push_back(std::move(metadata));
    frames.push_back(std::move(content));
    frames.insert(frames.end(), msg.buffers.begin(), msg.buffers.end());
    return frames;
}

result<wire_message> parse(const std::vector<std::string>& frames, std::string_view key) {
    const auto delim = std::find(frames.begin(), frames.end(), wire_delimiter);
    if (delim == frames.end()) {
        return malformed("wire message has no <IDS|MSG> delimiter");
    }
    if (frames.end() - delim < 6) {
        return malformed("wire message has fewer than 5 frames after the delimiter");
    }
    const std::string& signature = delim[1];
    if (!key.empty()) {
        const std::string expected = hmac_sha256_hex(key, {delim[2], delim[3], delim[4], delim[5]});
        if (!signatures_equal(signature, expected)) {
            return malformed("wire message has an invalid signature");
        }
    }
    wire_message msg;
    msg.identities.assign(frames.begin(), delim);
    json* parts[] = {&msg.header, &msg.parent_header, &msg.metadata, &msg.content};
    for (int i = 0; i < 4; ++i) {
        // As Python reads it: an int beyond 64 bits stays exact (a display of 2**70 as JSON).
        *parts[i] = parse_python_json_or_discarded<json>(delim[2 + i]);
        if (parts[i]->is_discarded() || !parts[i]->is_object()) {
            return malformed("wire message frame " + std::to_string(i + 2) +
                             " is not a JSON object");
        }
    }
    if (msg.msg_type().empty()) {
        return malformed("wire message header has no msg_type");
    }
    msg.buffers.assign(delim + 6, frames.end());
    return msg;
}

std::string strip_ansi(const std::string& text) {
    std::string out;
    for (std::size_t i = 0; i < text.size(); ++i) {
        if (text[i] == '\x1b' && i + 1 < text.size() && text[i + 1] == '[') {
            i += 2;
            while (i < text.size() && !(text[i] >= '@' && text[i] <= '~')) {
                ++i;
            }
            continue;
        }
        out.push_back(text[i]);
    }
    return out;
}

std::string traceback_text(const nlohmann::json& traceback, bool keep_colour) {
    std::string text;
    if (!traceback.is_array()) {
        return text;
    }
    for (const nlohmann::json& line : traceback) {
        if (line.is_string()) {
            text += (keep_colour ? line.get<std::string>() : strip_ansi(line.get<std::string>())) +
                    "\n";
        }
    }
    return text;
}

} // namespace kpool::protocol
