// Multipart send/receive without blocking: frames as strings, EAGAIN as a value, not an error.
#pragma once

#include <zmq.hpp>

#include <optional>
#include <string>
#include <vector>

namespace kpool::daemon {

// Receives one whole multipart message, or nothing if none is queued.
inline std::optional<std::vector<std::string>> recv_frames(zmq::socket_t& socket) {
    std::vector<std::string> frames;
    for (;;) {
        zmq::message_t part;
        const auto got = socket.recv(part, frames.empty() ? zmq::recv_flags::dontwait
                                                          : zmq::recv_flags::none);
        if (!got) {
            return std::nullopt; // EAGAIN before the first frame
        }
        frames.emplace_back(part.data<char>(), part.size());
        if (!part.more()) {
            return frames;
        }
    }
}

// Sends frames without blocking. Returns false if the message could not be queued (no peer,
// high-water mark reached); with ZMQ_ROUTER_MANDATORY that includes an unknown peer (throws
// EHOSTUNREACH, caught and reported as false).
inline bool send_frames(zmq::socket_t& socket, const std::vector<std::string>& frames) {
    try {
        for (std::size_t i = 0; i < frames.size(); ++i) {
            const bool last = i + 1 == frames.size();
            auto flags = zmq::send_flags::dontwait;
            if (!last) {
                flags = flags | zmq::send_flags::sndmore;
            }
            if (!socket.send(zmq::buffer(frames[i]), flags)) {
                return false;
            }
        }
        return true;
    } catch (const zmq::error_t& e) {
        if (e.num() == EHOSTUNREACH) {
            return false;
        }
        throw;
    }
}

} // namespace kpool::daemon
