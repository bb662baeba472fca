// Multipart send/receive without blocking: frames as strings, EAGAIN as a value, not an error.
#pragma once

#include <zmq.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kpool::loop {

// Receives one whole multipart message, or nothing if none is queued.
inline std::optional<std::vector<std::string>> recv_frames(zmq::socket_t& socket) {
    std::vector<std::string> frames;
    for (;;) {
        zmq::message_t part;
        const auto got =
            socket.recv(part, frames.empty() ? zmq::recv_flags::dontwait : zmq::recv_flags::none);
        if (!got) {
            return std::nullopt; // EAGAIN before the first frame
        }
        frames.emplace_back(part.data<char>(), part.size());
        if (!part.more()) {
            return frames;
        }
    }
}

enum class send_result {
    sent,
    would_block, // the peer's pipe is at its high-water mark: try again later
    no_peer,     // ROUTER_MANDATORY and the peer is gone (EHOSTUNREACH)
};

// Sends frames without blocking and says what happened. A ROUTER decides on the first frame,
// so a message is either sent whole or not at all.
inline send_result try_send_frames(zmq::socket_t& socket, const std::vector<std::string>& frames) {
    try {
        for (std::size_t i = 0; i < frames.size(); ++i) {
            const bool last = i + 1 == frames.size();
            auto flags = zmq::send_flags::dontwait;
            if (!last) {
                flags = flags | zmq::send_flags::sndmore;
            }
            if (!socket.send(zmq::buffer(frames[i]), flags)) {
                return send_result::would_block;
            }
        }
        return send_result::sent;
    } catch (const zmq::error_t& e) {
        if (e.num() == EHOSTUNREACH) {
            return send_result::no_peer;
        }
        throw;
    }
}

// Sends frames without blocking; false if they could not be queued (no peer, or the high-water
// mark reached).
inline bool send_frames(zmq::socket_t& socket, const std::vector<std::string>& frames) {
    return try_send_frames(socket, frames) == send_result::sent;
}

} // namespace kpool::loop
