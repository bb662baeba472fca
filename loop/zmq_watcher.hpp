// Drives a ZeroMQ socket from the libuv loop.
//
// libzmq's ZMQ_FD is edge-triggered and may go quiet while messages are still queued (after any
// send or receive), so the fd alone cannot be trusted. Following pyzmq's and zmq_libev's
// pattern: the fd wakes the loop; before the loop blocks (uv_prepare) we ask ZMQ_EVENTS, and if
// a message is waiting we keep the loop from blocking (uv_idle) and dispatch it (uv_check).
// on_readable is called while ZMQ_EVENTS says POLLIN, up to a batch limit per loop turn so one
// busy socket cannot starve the rest.
#pragma once

#include <uv.h>
#include <zmq.hpp>

#include <functional>
#include <memory>

namespace kpool::loop {

class zmq_watcher {
public:
    // `socket` must outlive this watcher (declare the watcher after the socket).
    // `on_readable` should receive one message with zmq::recv_flags::dontwait.
    zmq_watcher(uv_loop_t* loop, zmq::socket_t& socket, std::function<void()> on_readable);
    ~zmq_watcher();
    zmq_watcher(const zmq_watcher&) = delete;
    zmq_watcher& operator=(const zmq_watcher&) = delete;

private:
    struct handles;
    handles* m_handles; // freed by libuv close callbacks, after the destructor
};

} // namespace kpool::loop
