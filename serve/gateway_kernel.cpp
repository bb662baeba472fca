// gateway_kernel: a pooled kernel behind the Kernel Gateway API, and its websockets.
#include "serve/gateway_kernel.hpp"

#include "loop/logging.hpp"
#include "protocol/hmac.hpp"
#include "protocol/stamps.hpp"
#include "protocol/text.hpp"
#include "protocol/wire.hpp"

namespace kpool::serve {

using json = nlohmann::json;
using namespace std::chrono_literals;

gateway_kernel::gateway_kernel(uv_loop_t* loop, std::string id, std::string name,
                               connected_kernel kernel)
    : m_id(std::move(id)), m_name(std::move(name)), m_lease(std::move(kernel.lease)),
      m_channels(std::move(kernel.channels)), m_sweeper(loop) {
    m_channels->set_on_message(
        [this](kernel_port port, message_parts parts) { from_kernel(port, std::move(parts)); });
}

gateway_kernel::~gateway_kernel() = default;

kernel_lease gateway_kernel::replace(connected_kernel kernel) {
    // The old kernel says nothing more to the websockets (replace never runs inside one of its
    // message callbacks: a restart's kernel comes from a handshake or a control reply); its
    // channels are freed on the next loop turn, with whatever the loop still holds of them.
    m_channels->set_on_message(nullptr);
    m_retired.push_back(std::exchange(m_channels, std::move(kernel.channels)));
    m_channels->set_on_message(
        [this](kernel_port port, message_parts parts) { from_kernel(port, std::move(parts)); });
    m_sweeper.start(0ms, [this] { sweep(); });
    m_kept.clear();
    m_origin.clear();
    m_origin_order.clear();
    m_execution_state = "idle";
    m_last_activity = std::chrono::system_clock::now();
    return std::exchange(m_lease, std::move(kernel.lease));
}

status gateway_kernel::connect(http_exchange& exchange, std::size_t max_message) {
    const ws_protocol protocol = choose_protocol(exchange.header("sec-websocket-protocol"));
    const std::uint64_t aid = m_next_attachment++;
    websocket::handlers on;
    on.on_message = [this, aid](std::string_view data, bool binary) {
        from_client(aid, data, binary);
    };
    on.on_close = [this, aid] {
        if (auto it = m_attachments.find(aid); it != m_attachments.end()) {
            it->second.closed = true;
        }
        m_sweeper.start(0ms, [this] { sweep(); });
    };
    auto ws = websocket::accept(exchange,
                                protocol == ws_protocol::v1 ? v1_subprotocol : std::string_view(),
                                max_message, std::move(on));
    if (!ws) {
        return ws.err();
    }
    attachment& a = m_attachments[aid];
    a.socket = std::move(*ws);
    a.protocol = protocol;
    m_last_activity = std::chrono::system_clock::now();
    // What the kernel said while nobody listened, first.
    std::deque<channel_message> kept;
    kept.swap(m_kept);
    for (const channel_message& m : kept) {
        deliver(m, aid);
    }
    return ok_status();
}

void gateway_kernel::disconnect_all() {
    for (auto& [aid, a] : m_attachments) {
        a.socket->close(1001); // going away
    }
}

std::size_t gateway_kernel::connections() const {
    std::size_t n = 0;
    for (const auto& [aid, a] : m_attachments) {
        n += a.closed || !a.socket->is_open() ? 0 : 1;
    }
    return n;
}

json gateway_kernel::model() const {
    json model = {{"id", m_id},
                  {"name", m_name},
                  {"last_activity", protocol::iso8601_utc(m_last_activity)},
                  {"execution_state", m_execution_state},
                  {"connections", connections()}};
    if (!m_last_exit.empty()) {
        model["last_exit"] = m_last_exit;
    }
    return model;
}

void gateway_kernel::announce(const std::string& execution_state, const std::string& reason) {
    m_execution_state = execution_state;
    json content = {{"execution_state", execution_state}};
    if (!reason.empty()) {
        m_last_exit = reason;
        content["reason"] = reason;
    }
    const json header = {{"msg_id", protocol::random_uuid()},
                         {"msg_type", "status"},
                         {"username", "kpool"},
                         {"session", m_id},
                         {"date", protocol::iso8601_now()},
                         {"version", protocol::wire_protocol_version}};
    channel_message m{"iopub", {header.dump(), "{}", "{}", content.dump()}};
    deliver(m, std::nullopt);
}

void gateway_kernel::from_kernel(kernel_port port, message_parts parts) {
    m_last_activity = std::chrono::system_clock::now();
    channel_message message{std::string(port_name(port)), std::move(parts.frames)};
    std::optional<std::uint64_t> to;
    if (port == kernel_port::iopub) {
        // Only status messages are parsed beyond their header's bytes: outputs pass as they are.
        if (message.parts[0].find("\"status\"") != std::string::npos) {
            const json header = json::parse(message.parts[0], nullptr, false);
            const json content = json::parse(message.parts[3], nullptr, false);
            if (header.is_object() && header.value("msg_type", "") == "status" &&
                content.is_object() && content.contains("execution_state") &&
                content["execution_state"].is_string()) {
                m_execution_state = content["execution_state"].get<std::string>();
            }
        }
    } else {
        const json parent = json::parse(message.parts[1], nullptr, false);
        if (parent.is_object() && parent.contains("msg_id") && parent["msg_id"].is_string()) {
            if (auto it = m_origin.find(parent["msg_id"].get<std::string>());
                it != m_origin.end()) {
                to = it->second;
            }
        }
    }
    deliver(message, to);
}

void gateway_kernel::deliver(const channel_message& message, std::optional<std::uint64_t> to) {
    const auto open = [](const attachment& a) { return !a.closed && a.socket->is_open(); };
    // A reply goes to the websocket that asked, if it is still there; else to everyone.
    std::uint64_t only = 0; // 0: everyone (attachment ids start at 1)
    if (to) {
        auto it = m_attachments.find(*to);
        only = it != m_attachments.end() && open(it->second) ? *to : 0;
    }
    std::optional<ws_payload> encoded[2];
    bool sent = false;
    for (auto& [aid, a] : m_attachments) {
        if (!open(a) || (only != 0 && aid != only)) {
            continue;
        }
        auto& payload = encoded[a.protocol == ws_protocol::v1 ? 1 : 0];
        if (!payload) {
            payload = encode_for_client(a.protocol, message);
            if (!payload) {
                return; // not a message (a header without msg_id)
            }
        }
        a.socket->send(payload->data, payload->binary);
        sent = true;
    }
    if (!sent) {
        m_kept.push_back(message);
        if (m_kept.size() > max_kept) {
            m_kept.pop_front();
        }
    }
}

void gateway_kernel::from_client(std::uint64_t attachment_id, std::string_view data, bool binary) {
    auto a = m_attachments.find(attachment_id);
    if (a == m_attachments.end()) {
        return;
    }
    auto message = decode_client_message(a->second.protocol, data, binary);
    if (!message) {
        loop::logger("gateway")->warn("kernel {}: a websocket message was dropped: {}", m_id,
                                      message.err().message);
        return;
    }
    kernel_port port;
    if (message->channel == "shell") {
        port = kernel_port::shell;
    } else if (message->channel == "control") {
        port = kernel_port::control;
    } else if (message->channel == "stdin") {
        port = kernel_port::stdin_port;
    } else {
        loop::logger("gateway")->warn("kernel {}: a message for channel '{}' was dropped", m_id,
                                      protocol::echo_safe(message->channel));
        return;
    }
    const json header = json::parse(message->parts[0], nullptr, false);
    if (header.is_object() && header.contains("msg_id") && header["msg_id"].is_string()) {
        remember_origin(header["msg_id"].get<std::string>(), attachment_id);
    }
    m_last_activity = std::chrono::system_clock::now();
    if (!m_channels->send_parts(port, message->parts)) {
        loop::logger("gateway")->warn("kernel {}: the kernel's {} socket did not take a message",
                                      m_id, message->channel);
    }
}

void gateway_kernel::remember_origin(const std::string& msg_id, std::uint64_t attachment_id) {
    if (m_origin.insert_or_assign(msg_id, attachment_id).second) {
        m_origin_order.push_back(msg_id);
    }
    // Requests without a reply (comm messages) would otherwise pile up.
    while (m_origin_order.size() > max_kept) {
        m_origin.erase(m_origin_order.front());
        m_origin_order.pop_front();
    }
}

void gateway_kernel::sweep() {
    m_retired.clear();
    std::erase_if(m_attachments, [](const auto& entry) { return entry.second.closed; });
}

} // namespace kpool::serve
