// A leased kernel driven from the event loop: shell and iopub sockets watched by the loop, one
// jupyter::execution_driver at a time (one execute_request, or a notebook's cells several at
// once), a deadline timer for its time limits and grace periods. What kernel_client and
// jupyter::drive are to `kpool run`, this is to kpool serve.
#pragma once

#include "jupyter/execution_driver.hpp"
#include "loop/uv_timer.hpp"
#include "protocol/connection_info.hpp"
#include "protocol/result.hpp"
#include "serve/kernel_channels.hpp"

#include <uv.h>
#include <zmq.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

namespace kpool::serve {

class kernel_session {
public:
    kernel_session(uv_loop_t* loop, zmq::context_t& zmq, const protocol::connection_info& info);
    // On channels already connected (a spare's).
    kernel_session(uv_loop_t* loop, std::unique_ptr<kernel_channels> channels);
    ~kernel_session();
    kernel_session(const kernel_session&) = delete;
    kernel_session& operator=(const kernel_session&) = delete;

    // kernel_info round trips until one's iopub message arrives: then iopub is subscribed and no
    // output of what follows can be missed (a SUB joins late; kernel_channels::when_subscribed).
    // kernel_info() holds the kernel_info_reply once it comes, before the reply to the first
    // execute.
    void when_subscribed(std::chrono::milliseconds timeout,
                         std::function<void(result<nlohmann::json>)> done);
    // The same, and kernel_info() holds the reply before `done`: for a caller that decides by it
    // before its first execute (a notebook's cells sent ahead, runner::run_ahead_for). The reply
    // comes between the kernel's busy and idle statuses, so this waits no more than a moment.
    void when_ready(std::chrono::milliseconds timeout,
                    std::function<void(result<nlohmann::json>)> done);
    const nlohmann::json& kernel_info() const { return m_channels->kernel_info(); }

    struct execute_callbacks {
        std::function<void(const protocol::wire_message&)> on_iopub; // the request's messages
        std::function<void()> interrupt;                             // the time limit passed
        std::function<void(const jupyter::execution&)> done;         // once
    };
    // One at a time. `done` may destroy the session only by handing it to something that
    // destroys it later (kpool serve retires it to the next loop turn): its sockets' watcher
    // is still on the stack.
    void execute(const jupyter::execute_request& request, execute_callbacks callbacks);

    // Starts `driver` and feeds it the kernel's shell and iopub messages and the clock until it
    // has finished; `interrupt` when it asks, `done` once (as execute's). One at a time.
    void drive(std::unique_ptr<jupyter::execution_driver> driver, std::function<void()> interrupt,
               std::function<void()> done);
    // How a driver sends an execute_request on this kernel's shell channel.
    jupyter::send_execute_fn sender();

    // The kernel is gone (kpoold says so): the execution in progress ends now.
    void kernel_died();
    // The caller gives up: the kernel is interrupted, the execution ends soon after.
    void cancel();

private:
    void on_message(kernel_port from, message_parts parts);
    void tick();
    void arm();
    // Calls `done` when the execution is over: then true, and this session may be gone.
    bool finish_if_done();

    std::unique_ptr<kernel_channels> m_channels;
    loop::uv_timer m_timer;

    // what drive() runs
    std::unique_ptr<jupyter::execution_driver> m_driver;
    std::function<void()> m_interrupt;
    std::function<void()> m_done;
    bool m_cancel = false;
};

} // namespace kpool::serve
