// zmq_watcher: uv_poll + uv_prepare/uv_check/uv_idle around one ZeroMQ socket.
#include "loop/zmq_watcher.hpp"

#include "loop/logging.hpp"
#include "loop/uv_handle.hpp"

#include <stdexcept>

namespace kpool::loop {

namespace {
constexpr int max_messages_per_turn = 256;
}

struct zmq_watcher::handles final : uv_handle_group<zmq_watcher::handles> {
    uv_poll_t poll;
    uv_prepare_t prepare;
    uv_check_t check;
    uv_idle_t idle;
    zmq::socket_t* socket = nullptr; // null once the owner is gone
    std::function<void()> on_readable;

    bool releasable() const { return socket == nullptr; }

    bool readable() const noexcept {
        try {
            return socket != nullptr && (socket->get(zmq::sockopt::events) & ZMQ_POLLIN) != 0;
        } catch (const zmq::error_t&) {
            return false; // the context is terminating; nothing more will arrive
        }
    }

    void dispatch() {
        for (int i = 0; i < max_messages_per_turn && readable(); ++i) {
            try {
                on_readable();
            } catch (const std::exception& e) {
                logger("daemon")->error("zmq socket handler failed: {}", e.what());
            }
        }
    }

    template <class H>
    static handles* of(H* h) {
        return static_cast<handles*>(h->data);
    }
};

zmq_watcher::zmq_watcher(uv_loop_t* loop, zmq::socket_t& socket, std::function<void()> on_readable)
    : m_handles(new handles) {
    m_handles->socket = &socket;
    m_handles->on_readable = std::move(on_readable);
    const int fd = socket.get(zmq::sockopt::fd);
    if (int rc = uv_poll_init(loop, &m_handles->poll, fd); rc != 0) {
        delete m_handles;
        throw std::runtime_error(std::string("uv_poll_init: ") + uv_strerror(rc));
    }
    m_handles->adopt(&m_handles->poll);
    // These three cannot fail on a valid loop.
    uv_prepare_init(loop, &m_handles->prepare);
    m_handles->adopt(&m_handles->prepare);
    uv_check_init(loop, &m_handles->check);
    m_handles->adopt(&m_handles->check);
    uv_idle_init(loop, &m_handles->idle);
    m_handles->adopt(&m_handles->idle);

    uv_poll_start(&m_handles->poll, UV_READABLE,
                  [](uv_poll_t* h, int, int) { handles::of(h)->dispatch(); });
    uv_prepare_start(&m_handles->prepare, [](uv_prepare_t* h) {
        auto* self = handles::of(h);
        if (self->readable()) {
            uv_idle_start(&self->idle, [](uv_idle_t*) {});
        } else {
            uv_idle_stop(&self->idle);
        }
    });
    uv_check_start(&m_handles->check, [](uv_check_t* h) { handles::of(h)->dispatch(); });
    // Housekeeping handles must not keep the loop alive on their own.
    uv_unref(reinterpret_cast<uv_handle_t*>(&m_handles->prepare));
    uv_unref(reinterpret_cast<uv_handle_t*>(&m_handles->check));
}

zmq_watcher::~zmq_watcher() {
    // The callback may be running right now (its owner destroyed us from inside it), so it stays
    // alive until the handles are freed; a null socket stops further dispatch.
    m_handles->socket = nullptr;
    // Closing the poll handle stops watching the fd now, before the owner closes the socket.
    m_handles->close(&m_handles->poll);
    m_handles->close(&m_handles->prepare);
    m_handles->close(&m_handles->check);
    m_handles->close(&m_handles->idle);
}

} // namespace kpool::loop
