// kernel_client: sockets, signed messages, readiness, and the execute loop.
#include "jupyter/kernel_client.hpp"

#include "jupyter/execution_tracker.hpp"

#include "protocol/hmac.hpp"

#include <algorithm>
#include <array>
#include <cerrno>

namespace kpool::jupyter {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

std::optional<std::vector<std::string>> recv_multipart(zmq::socket_t& socket) {
    std::vector<std::string> frames;
    for (;;) {
        zmq::message_t part;
        if (!socket.recv(part,
                         frames.empty() ? zmq::recv_flags::dontwait : zmq::recv_flags::none)) {
            return std::nullopt;
        }
        frames.emplace_back(part.data<char>(), part.size());
        if (!part.more()) {
            return frames;
        }
    }
}

std::chrono::milliseconds left(clock::time_point deadline) {
    return std::max(0ms, std::chrono::ceil<std::chrono::milliseconds>(deadline - clock::now()));
}

} // namespace

kernel_client::kernel_client(zmq::context_t& zmq, const protocol::connection_info& info)
    : m_shell(zmq, zmq::socket_type::dealer), m_control(zmq, zmq::socket_type::dealer),
      m_iopub(zmq, zmq::socket_type::sub), m_key(info.key), m_session(protocol::random_hex(16)) {
    for (zmq::socket_t* s : {&m_shell, &m_control, &m_iopub}) {
        s->set(zmq::sockopt::linger, 0);
    }
    m_iopub.set(zmq::sockopt::subscribe, "");
    m_shell.connect(info.endpoint(info.shell_port));
    m_control.connect(info.endpoint(info.control_port));
    m_iopub.connect(info.endpoint(info.iopub_port));
}

std::string kernel_client::send(channel on, std::string_view msg_type, json content) {
    auto msg = protocol::make_message(msg_type, m_session, std::move(content));
    zmq::socket_t& socket = on == channel::control ? m_control : m_shell;
    const auto frames = protocol::serialize(msg, m_key);
    for (std::size_t i = 0; i < frames.size(); ++i) {
        socket.send(zmq::buffer(frames[i]),
                    i + 1 < frames.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
    return msg.msg_id();
}

std::optional<incoming> kernel_client::receive(std::chrono::milliseconds timeout) {
    const auto deadline = clock::now() + timeout;
    std::array<zmq::pollitem_t, 3> items{{{m_iopub.handle(), 0, ZMQ_POLLIN, 0},
                                          {m_shell.handle(), 0, ZMQ_POLLIN, 0},
                                          {m_control.handle(), 0, ZMQ_POLLIN, 0}}};
    constexpr std::array<channel, 3> channels{channel::iopub, channel::shell, channel::control};
    for (;;) {
        // iopub first: a cell's outputs precede its reply on the wire (separate sockets, so
        // this is the best order we can keep when both are ready).
        for (std::size_t i = 0; i < items.size(); ++i) {
            zmq::socket_t& s = i == 0 ? m_iopub : i == 1 ? m_shell : m_control;
            if (auto frames = recv_multipart(s)) {
                auto msg = protocol::parse(*frames, m_key);
                if (msg) {
                    return incoming{channels[i], std::move(*msg)};
                }
            }
        }
        const auto wait = left(deadline);
        if (wait.count() == 0) {
            return std::nullopt;
        }
        try {
            zmq::poll(items.data(), items.size(), wait);
        } catch (const zmq::error_t& e) {
            if (e.num() == EINTR) {
                return std::nullopt; // a signal: the caller decides what it means
            }
            throw;
        }
    }
}

result<json> kernel_client::wait_until_ready(std::chrono::milliseconds timeout) {
    const auto deadline = clock::now() + timeout;
    while (clock::now() < deadline) {
        const std::string id = send(channel::shell, "kernel_info_request", json::object());
        json reply;
        bool iopub_seen = false;
        // A reply within a second, then its iopub status within 200 ms, else ask again.
        auto round_end = std::min(deadline, clock::now() + 1000ms);
        while (clock::now() < round_end && !(iopub_seen && !reply.is_null())) {
            auto got = receive(left(round_end));
            if (!got || got->msg.parent_msg_id() != id) {
                continue;
            }
            if (got->from == channel::iopub) {
                iopub_seen = true;
            } else if (got->from == channel::shell && got->msg.msg_type() == "kernel_info_reply") {
                reply = got->msg.content;
                round_end = std::min(deadline, clock::now() + 200ms);
            }
        }
        if (iopub_seen && !reply.is_null()) {
            return reply;
        }
    }
    return error{errc::timeout, "the kernel did not answer kernel_info within " +
                                    std::to_string(timeout.count()) + " ms"};
}

} // namespace kpool::jupyter
