// control_server: ROUTER socket setup, envelope splitting, framing errors, replies.
#include "daemon/service/control_server.hpp"

#include "loop/logging.hpp"
#include "loop/zmq_frames.hpp"
#include "protocol/control.hpp"

#include <sys/stat.h>
#include <unistd.h>

namespace kpool::daemon {
namespace {

using namespace std::chrono_literals;
constexpr std::chrono::milliseconds min_flush_delay = 1ms;
constexpr std::chrono::milliseconds max_flush_delay = 64ms;

} // namespace

control_server::control_server(uv_loop_t* loop, zmq::context_t& zmq, std::string endpoint,
                               const control_security& security, handler on_request)
    : m_endpoint(std::move(endpoint)), m_on_request(std::move(on_request)),
      m_socket(zmq, zmq::socket_type::router) {
    m_socket.set(zmq::sockopt::linger, 0);
    // A reply to a client that left fails with EHOSTUNREACH instead of vanishing, so an acquire
    // nobody received can give its kernel back.
    m_socket.set(zmq::sockopt::router_mandatory, true);
    // Huge messages never reach us: libzmq drops the peer instead of buffering them.
    m_socket.set(zmq::sockopt::maxmsgsize, protocol::max_message_bytes);
    if (security.ask_zap) {
        // With the NULL mechanism libzmq consults ZAP only when a domain is set.
        m_socket.set(zmq::sockopt::zap_domain, "kpool");
    }
    if (!security.curve_secret_key.empty()) {
        m_socket.set(zmq::sockopt::curve_server, true);
        m_socket.set(zmq::sockopt::curve_secretkey, zmq::buffer(security.curve_secret_key));
    }
    // libzmq does not chmod ipc sockets; a 077 umask makes the file 0600 as it is created.
    const mode_t old_mask = ::umask(077);
    try {
        m_socket.bind(m_endpoint);
    } catch (...) {
        ::umask(old_mask);
        throw;
    }
    ::umask(old_mask);
    if (security.ipc_world_connectable && m_endpoint.starts_with("ipc://") &&
        ::chmod(m_endpoint.substr(6).c_str(), 0666) != 0) {
        throw zmq::error_t(); // errno says why
    }
    m_flush_timer = std::make_unique<loop::uv_timer>(loop);
    m_watcher = std::make_unique<loop::zmq_watcher>(loop, m_socket, [this] { on_readable(); });
    loop::logger("control")->info("control socket bound at {}", m_endpoint);
}

control_server::~control_server() {
    m_watcher.reset();
    if (m_endpoint.starts_with("ipc://")) {
        // libzmq removes the file when the socket closes, but only when it bound it itself;
        // unbinding first makes that explicit.
        try {
            m_socket.unbind(m_endpoint);
        } catch (const zmq::error_t&) {
        }
        ::unlink(m_endpoint.substr(6).c_str());
    }
}

bool control_server::reply(const envelope& env, const std::string& body) {
    std::vector<std::string> frames = env.frames;
    frames.push_back(body);
    const std::string& client = env.frames.front();
    auto queued = m_backlog.find(client);
    if (queued == m_backlog.end()) {
        switch (loop::try_send_frames(m_socket, frames)) {
        case loop::send_result::sent: return true;
        case loop::send_result::no_peer:
            loop::logger("control")->warn("reply not delivered: the client is gone");
            return false;
        case loop::send_result::would_block: break;
        }
        queued = m_backlog.emplace(client, backlog{}).first;
        if (!m_flush_timer->active()) {
            m_flush_delay = min_flush_delay;
            m_flush_timer->start(m_flush_delay, [this] { flush(); });
        }
    }
    backlog& q = queued->second;
    q.bytes += body.size() + client.size();
    q.replies.push_back(std::move(frames));
    if (q.replies.size() > max_queued_replies || q.bytes > max_queued_bytes) {
        loop::logger("control")->warn("a client is not reading its replies: {} of them ({} bytes) "
                                      "dropped",
                                      q.replies.size(), q.bytes);
        m_backlog.erase(queued);
    }
    return true;
}

void control_server::flush() {
    bool progress = false;
    for (auto it = m_backlog.begin(); it != m_backlog.end();) {
        backlog& q = it->second;
        bool gone = false;
        while (!q.replies.empty()) {
            const auto outcome = loop::try_send_frames(m_socket, q.replies.front());
            if (outcome == loop::send_result::would_block) {
                break;
            }
            gone = outcome == loop::send_result::no_peer;
            if (gone) {
                break;
            }
            q.bytes -= q.replies.front().back().size() + it->first.size();
            q.replies.pop_front();
            progress = true;
        }
        if (gone) {
            loop::logger("control")->warn("{} queued replies not delivered: the client is gone",
                                          q.replies.size());
        }
        it = gone || q.replies.empty() ? m_backlog.erase(it) : std::next(it);
    }
    if (m_backlog.empty()) {
        m_flush_timer->stop();
        return;
    }
    // A client that reads gets its replies within milliseconds; one that does not costs a
    // wake-up every max_flush_delay at most.
    m_flush_delay = progress ? min_flush_delay : std::min(m_flush_delay * 2, max_flush_delay);
    m_flush_timer->start(m_flush_delay, [this] { flush(); });
}

void control_server::on_readable() {
    if (!m_backlog.empty()) {
        flush(); // a client that sends may be reading again too: earlier replies go first
    }
    auto frames = loop::recv_frames(m_socket);
    if (!frames || frames->empty()) {
        return;
    }
    // frames[0] is the routing id ROUTER added; the envelope ends at the first empty frame.
    std::size_t delimiter = 1;
    while (delimiter < frames->size() && !(*frames)[delimiter].empty()) {
        ++delimiter;
    }
    envelope env;
    if (delimiter == frames->size()) {
        env.frames = {(*frames)[0]};
        reply(env, protocol::make_error_reply(
                       {errc::bad_request, "missing the empty delimiter frame before the request"},
                       nullptr));
        return;
    }
    env.frames.assign(frames->begin(), frames->begin() + static_cast<long>(delimiter) + 1);
    const std::size_t body_frames = frames->size() - delimiter - 1;
    if (body_frames != 1) {
        reply(env,
              protocol::make_error_reply(
                  {errc::bad_request,
                   body_frames == 0 ? std::string("empty request: no frame after the delimiter")
                                    : "expected one request frame after the delimiter, got " +
                                          std::to_string(body_frames)},
                  nullptr));
        return;
    }
    m_on_request(env, frames->back());
}

} // namespace kpool::daemon
