// zap_handler: a REP socket at the address libzmq asks, one decision per request.
#include "daemon/service/zap_handler.hpp"

#include "loop/logging.hpp"
#include "loop/zmq_frames.hpp"

namespace kpool::daemon {

zap_handler::zap_handler(uv_loop_t* loop, zmq::context_t& zmq, access_policy policy)
    : m_policy(std::move(policy)), m_socket(zmq, zmq::socket_type::rep) {
    m_socket.set(zmq::sockopt::linger, 0);
    m_socket.bind("inproc://zeromq.zap.01"); // the address RFC 27 fixes
    m_watcher = std::make_unique<loop::zmq_watcher>(loop, m_socket, [this] { on_readable(); });
}

zap_handler::~zap_handler() { m_watcher.reset(); }

void zap_handler::on_readable() {
    auto request = loop::recv_frames(m_socket);
    if (!request) {
        return;
    }
    const access_decision decision = decide(m_policy, *request);
    if (!decision.allowed) {
        loop::logger("control")->warn("connection refused: {}", decision.reason);
    }
    loop::send_frames(m_socket, zap_reply(*request, decision));
}

} // namespace kpool::daemon
