// One kernel as kpool serve's Kernel Gateway API holds it: a kernel leased from a kpoold under
// an id of our own (a restart swaps in another warm kernel under the same id), its four
// channels, and the websockets connected to it. What the kernel sends goes to every websocket
// (iopub) or to the one whose request it answers (shell, control, stdin); while none is
// connected it is kept, bounded, and delivered to the next. execution_state and last_activity
// follow the kernel's messages, as jupyter_server's kernel model reports them.
#pragma once

#include "serve/connected_kernel.hpp"
#include "serve/websocket.hpp"
#include "serve/ws_frames.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstddef>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kpool::serve {

class gateway_kernel {
public:
    // On a kernel whose channels are connected and subscribed.
    gateway_kernel(uv_loop_t* loop, std::string id, std::string name, connected_kernel kernel);
    ~gateway_kernel();
    gateway_kernel(const gateway_kernel&) = delete;
    gateway_kernel& operator=(const gateway_kernel&) = delete;

    const std::string& id() const { return m_id; }
    const std::string& name() const { return m_name; }
    const kernel_lease& lease() const { return m_lease; }

    // Restart: the websockets stay, the kernel behind them is `kernel` from now on. Returns the
    // old one's lease, for release; messages kept for a websocket to come were the old
    // kernel's: dropped.
    kernel_lease replace(connected_kernel kernel);

    // Upgrades `exchange` to a websocket on this kernel (the protocol from its offer). An error
    // (nothing answered) when it is not a websocket handshake.
    status connect(http_exchange& exchange, std::size_t max_message);
    // Closes every websocket (kernel deleted, kpool serve stopping).
    void disconnect_all();

    // Sends a status message of our own on iopub (restarting, dead), as jupyter_server does.
    // `reason`: why the kernel went, when kpoold knows ("out of memory (limit 512 MiB)"), in the
    // message's content and in the model from now on.
    void announce(const std::string& execution_state, const std::string& reason = {});

    // {id, name, last_activity, execution_state, connections}, jupyter_server's kernel model;
    // with "last_exit" (announce's reason) once a kernel under this id died of something known.
    nlohmann::json model() const;
    std::size_t connections() const;
    const std::string& execution_state() const { return m_execution_state; }
    std::chrono::system_clock::time_point last_activity() const { return m_last_activity; }

    // Messages kept while no websocket is connected, at most this many (the oldest go first).
    static constexpr std::size_t max_kept = 4096;

private:
    struct attachment {
        std::unique_ptr<websocket> socket;
        ws_protocol protocol = ws_protocol::legacy;
        bool closed = false;
    };
    void from_kernel(kernel_port port, message_parts parts);
    void from_client(std::uint64_t attachment_id, std::string_view data, bool binary);
    void deliver(const channel_message& message, std::optional<std::uint64_t> to);
    void sweep();
    void remember_origin(const std::string& msg_id, std::uint64_t attachment_id);

    std::string m_id;
    std::string m_name;
    kernel_lease m_lease;
    std::unique_ptr<kernel_channels> m_channels;
    std::vector<std::unique_ptr<kernel_channels>> m_retired; // freed on the next loop turn
    std::map<std::uint64_t, attachment> m_attachments;
    std::uint64_t m_next_attachment = 1;
    loop::uv_timer m_sweeper; // removes closed websockets on the next loop turn
    std::deque<channel_message> m_kept;
    // Which websocket sent a request, by its msg_id, so that its replies go back there only.
    std::map<std::string, std::uint64_t> m_origin;
    std::deque<std::string> m_origin_order;
    std::string m_execution_state = "idle";
    std::string m_last_exit;
    std::chrono::system_clock::time_point m_last_activity = std::chrono::system_clock::now();
};

} // namespace kpool::serve
