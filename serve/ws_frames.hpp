// Jupyter messages as a kernel websocket carries them, both ways, in the two protocols
// jupyter_server speaks: the legacy one (a JSON text frame with a "channel" field; a binary
// frame of big-endian u32 offsets, the JSON, then buffers, when a message has buffers) and
// `v1.kernel.websocket.jupyter.org` (binary: little-endian u64 offsets, the channel, then the
// wire frames as they are). Pure: bytes in, bytes out; the fuzzer feeds it directly.
#pragma once

#include "protocol/result.hpp"

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kpool::serve {

inline constexpr std::string_view v1_subprotocol = "v1.kernel.websocket.jupyter.org";

enum class ws_protocol { legacy, v1 };

// A message and its channel; parts: header, parent_header, metadata, content (JSON text each),
// then buffers: the frames of the wire protocol after the signature.
struct channel_message {
    std::string channel;
    std::vector<std::string> parts;
};

// The protocol for a handshake's Sec-WebSocket-Protocol offer (comma-separated names): v1 when
// offered, else legacy.
ws_protocol choose_protocol(const std::optional<std::string>& offered);

// A client's websocket message. Errors (bad_request) say what is wrong with it. Legacy messages
// without a channel go to shell, as jupyter_server does.
result<channel_message> decode_client_message(ws_protocol protocol, std::string_view data,
                                              bool binary);

struct ws_payload {
    std::string data;
    bool binary = false;
};
// A kernel's message for a client. Legacy: the JSON a client of jupyter_server gets (msg_id and
// msg_type beside the header, "buffers": [] and "channel"), binary when there are buffers.
// nullopt when the header is not a JSON object with a msg_id (not a message).
std::optional<ws_payload> encode_for_client(ws_protocol protocol, const channel_message& message);

} // namespace kpool::serve
