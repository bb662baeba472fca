// The ZAP handler: answers libzmq's authentication requests for the control socket from the
// event loop, by access_policy. Bound before the control socket, so no connection is ever
// accepted without being asked about.
#pragma once

#include "daemon/service/access_policy.hpp"
#include "loop/zmq_watcher.hpp"

#include <uv.h>
#include <zmq.hpp>

#include <memory>

namespace kpool::daemon {

class zap_handler {
public:
    // Binds inproc://zeromq.zap.01 in `zmq` (throws zmq::error_t if it cannot).
    zap_handler(uv_loop_t* loop, zmq::context_t& zmq, access_policy policy);
    ~zap_handler();
    zap_handler(const zap_handler&) = delete;
    zap_handler& operator=(const zap_handler&) = delete;

private:
    void on_readable();

    access_policy m_policy;
    zmq::socket_t m_socket;
    std::unique_ptr<loop::zmq_watcher> m_watcher;
};

} // namespace kpool::daemon
