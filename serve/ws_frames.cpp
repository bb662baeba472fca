// ws_frames: the websocket message formats of jupyter_server's kernel channels.
#include "serve/ws_frames.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>

namespace kpool::serve {
namespace {

using json = nlohmann::json;

error bad(std::string message) { return {errc::bad_request, std::move(message)}; }

std::uint64_t read_le64(std::string_view data, std::size_t at) {
    std::uint64_t v = 0;
    for (std::size_t i = 0; i < 8; ++i) {
        v |= static_cast<std::uint64_t>(static_cast<unsigned char>(data[at + i])) << (8 * i);
    }
    return v;
}

std::uint32_t read_be32(std::string_view data, std::size_t at) {
    std::uint32_t v = 0;
    for (std::size_t i = 0; i < 4; ++i) {
        v = (v << 8) | static_cast<unsigned char>(data[at + i]);
    }
    return v;
}

void append_le64(std::string& out, std::uint64_t v) {
    for (std::size_t i = 0; i < 8; ++i) {
        out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    }
}

void append_be32(std::string& out, std::uint32_t v) {
    for (int i = 3; i >= 0; --i) {
        out.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
    }
}

std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

// A legacy message's JSON (buffers come separately) as wire parts.
result<channel_message> from_legacy_json(std::string_view text, std::vector<std::string> buffers) {
    json msg = json::parse(text, nullptr, false);
    if (!msg.is_object()) {
        return bad("a kernel message must be a JSON object");
    }
    channel_message out;
    const json& channel = msg.contains("channel") ? msg["channel"] : json("shell");
    if (!channel.is_string()) {
        return bad("'channel' must be a string");
    }
    out.channel = channel.get<std::string>();
    const json& header = msg.contains("header") ? msg["header"] : json();
    if (!header.is_object() || !header.contains("msg_type") || !header["msg_type"].is_string()) {
        return bad("'header' must be an object with a msg_type");
    }
    out.parts.push_back(dump(header));
    for (const char* name : {"parent_header", "metadata", "content"}) {
        const json& part = msg.contains(name) && !msg[name].is_null() ? msg[name] : json::object();
        if (!part.is_object()) {
            return bad(std::string("'") + name + "' must be an object");
        }
        out.parts.push_back(dump(part));
    }
    for (std::string& b : buffers) {
        out.parts.push_back(std::move(b));
    }
    return out;
}

// [count][offsets...] in `width`-byte integers, offsets from the start; the pieces between them.
template <typename Read>
result<std::vector<std::string_view>> split_offsets(std::string_view data, std::size_t width,
                                                    Read read) {
    if (data.size() < width) {
        return bad("binary message shorter than its offset count");
    }
    const std::uint64_t count = read(data, 0);
    if (count == 0 || count > 4096 || (count + 1) * width > data.size()) {
        return bad("binary message with a bad offset count");
    }
    std::vector<std::uint64_t> offsets;
    for (std::uint64_t i = 0; i < count; ++i) {
        offsets.push_back(read(data, (i + 1) * width));
    }
    offsets.push_back(data.size());
    std::vector<std::string_view> pieces;
    for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
        if (offsets[i] < (count + 1) * width || offsets[i] > offsets[i + 1] ||
            offsets[i + 1] > data.size()) {
            return bad("binary message with offsets out of order or out of range");
        }
        pieces.push_back(data.substr(offsets[i], offsets[i + 1] - offsets[i]));
    }
    return pieces;
}

} // namespace

ws_protocol choose_protocol(const std::optional<std::string>& offered) {
    if (!offered) {
        return ws_protocol::legacy;
    }
    std::string_view rest = *offered;
    while (!rest.empty()) {
        const std::size_t comma = rest.find(',');
        std::string_view name = rest.substr(0, comma);
        while (!name.empty() && name.front() == ' ') {
            name.remove_prefix(1);
        }
        while (!name.empty() && name.back() == ' ') {
            name.remove_suffix(1);
        }
        if (name == v1_subprotocol) {
            return ws_protocol::v1;
        }
        rest = comma == std::string_view::npos ? std::string_view() : rest.substr(comma + 1);
    }
    return ws_protocol::legacy;
}

result<channel_message> decode_client_message(ws_protocol protocol, std::string_view data,
                                              bool binary) {
    if (protocol == ws_protocol::legacy) {
        // jupyter_server 1.23's gateway client forwards a browser's binary message (buffers) in a
        // text frame: what cannot be JSON (no '{') is read as the binary layout it is.
        if (!binary && (data.empty() || data.front() == '{')) {
            return from_legacy_json(data, {});
        }
        // The count is of the pieces (JSON first, then buffers), and the JSON starts after it.
        auto pieces =
            split_offsets(data, 4, [](std::string_view d, std::size_t at) -> std::uint64_t {
                return read_be32(d, at);
            });
        if (!pieces) {
            return pieces.err();
        }
        std::vector<std::string> buffers(pieces->begin() + 1, pieces->end());
        return from_legacy_json(pieces->front(), std::move(buffers));
    }
    if (!binary) {
        return bad("the v1 kernel websocket protocol takes binary messages only");
    }
    // v1: the count is of the offsets; the pieces are the channel, then the wire parts.
    auto pieces = split_offsets(data, 8, read_le64);
    if (!pieces) {
        return pieces.err();
    }
    pieces->pop_back(); // the last offset is the end of the message: an empty piece
    if (pieces->size() < 5) {
        return bad("a v1 message needs a channel, header, parent_header, metadata and content");
    }
    channel_message out;
    out.channel = std::string(pieces->front());
    const json header = json::parse((*pieces)[1], nullptr, false);
    if (!header.is_object() || !header.contains("msg_type")) {
        return bad("'header' must be an object with a msg_type");
    }
    out.parts.assign(pieces->begin() + 1, pieces->end());
    return out;
}

std::optional<ws_payload> encode_for_client(ws_protocol protocol, const channel_message& message) {
    if (message.parts.size() < 4) {
        return std::nullopt;
    }
    if (protocol == ws_protocol::v1) {
        const std::size_t count = message.parts.size() + 2; // offsets: channel, parts, end
        ws_payload out{{}, true};
        std::uint64_t at = 8 * (count + 1);
        append_le64(out.data, count);
        append_le64(out.data, at);
        at += message.channel.size();
        append_le64(out.data, at);
        for (const std::string& part : message.parts) {
            at += part.size();
            append_le64(out.data, at);
        }
        out.data += message.channel;
        for (const std::string& part : message.parts) {
            out.data += part;
        }
        return out;
    }
    const json header = json::parse(message.parts[0], nullptr, false);
    if (!header.is_object() || !header.contains("msg_id") || !header["msg_id"].is_string()) {
        return std::nullopt;
    }
    // The kernel's JSON parts go in as they are: parsing and re-serializing large outputs
    // would cost more than everything else the gateway does with them.
    std::string text = "{\"header\":" + message.parts[0] + ",\"msg_id\":" + dump(header["msg_id"]) +
                       ",\"msg_type\":" + dump(header.value("msg_type", json(""))) +
                       ",\"parent_header\":" + message.parts[1] +
                       ",\"metadata\":" + message.parts[2] + ",\"content\":" + message.parts[3] +
                       ",\"buffers\":[],\"channel\":" + dump(json(message.channel)) + "}";
    if (message.parts.size() == 4) {
        return ws_payload{std::move(text), false};
    }
    const std::size_t pieces = message.parts.size() - 3; // the JSON, then each buffer
    ws_payload out{{}, true};
    std::uint64_t at = 4 * (pieces + 1);
    append_be32(out.data, static_cast<std::uint32_t>(pieces));
    append_be32(out.data, static_cast<std::uint32_t>(at)); // where each piece starts
    at += text.size();
    for (std::size_t i = 4; i < message.parts.size(); ++i) {
        append_be32(out.data, static_cast<std::uint32_t>(at));
        at += message.parts[i].size();
    }
    out.data += text;
    for (std::size_t i = 4; i < message.parts.size(); ++i) {
        out.data += message.parts[i];
    }
    return out;
}

} // namespace kpool::serve
