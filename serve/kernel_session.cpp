// kernel_session: the wire protocol of one execution at a time, from libuv callbacks.
#include "serve/kernel_session.hpp"

#include "protocol/wire.hpp"

namespace kpool::serve {

using json = nlohmann::json;
using namespace std::chrono_literals;
using clock = std::chrono::steady_clock;

kernel_session::kernel_session(uv_loop_t* loop, zmq::context_t& zmq,
                               const protocol::connection_info& info)
    : kernel_session(loop, std::make_unique<kernel_channels>(loop, zmq, info, false, nullptr)) {}

kernel_session::kernel_session(uv_loop_t* loop, std::unique_ptr<kernel_channels> channels)
    : m_channels(std::move(channels)), m_timer(loop) {
    m_channels->set_on_message(
        [this](kernel_port from, message_parts parts) { on_message(from, std::move(parts)); });
}

kernel_session::~kernel_session() = default;

void kernel_session::when_subscribed(std::chrono::milliseconds timeout,
                                     std::function<void(result<json>)> done) {
    m_channels->when_subscribed(timeout, std::move(done));
}

jupyter::send_execute_fn kernel_session::sender() {
    return [this](const jupyter::execute_request& request) {
        return m_channels->send(kernel_port::shell, "execute_request",
                                jupyter::execute_request_content(request));
    };
}

void kernel_session::when_ready(std::chrono::milliseconds timeout,
                                std::function<void(result<json>)> done) {
    m_channels->when_ready(timeout, std::move(done));
}

void kernel_session::execute(const jupyter::execute_request& request, execute_callbacks callbacks) {
    auto one = std::make_unique<jupyter::single_execution>(sender(), request,
                                                           std::move(callbacks.on_iopub));
    const jupyter::single_execution* running = one.get();
    drive(std::move(one), std::move(callbacks.interrupt),
          [running, done = std::move(callbacks.done)] {
              if (done) {
                  done(running->result()); // finish_if_done keeps the driver until `done` returns
              }
          });
}

void kernel_session::drive(std::unique_ptr<jupyter::execution_driver> driver,
                           std::function<void()> interrupt, std::function<void()> done) {
    m_driver = std::move(driver);
    m_interrupt = std::move(interrupt);
    m_done = std::move(done);
    m_cancel = false;
    m_driver->start(clock::now());
    if (!finish_if_done()) {
        arm();
    }
}

void kernel_session::kernel_died() {
    if (m_driver) {
        m_driver->kernel_died(clock::now());
        finish_if_done(); // last: may destroy this session
    }
}

void kernel_session::cancel() {
    if (m_driver) {
        m_cancel = true;
        tick();
    }
}

void kernel_session::arm() {
    if (!m_driver) {
        return;
    }
    // Woken at the driver's next deadline, and every second besides (a cancel, a limit).
    auto wake = clock::now() + 1000ms;
    if (auto d = m_driver->next_deadline(); d && *d < wake) {
        wake = *d;
    }
    const auto delay =
        std::max(0ms, std::chrono::ceil<std::chrono::milliseconds>(wake - clock::now()));
    m_timer.start(delay, [this] { tick(); });
}

void kernel_session::tick() {
    if (!m_driver) {
        return;
    }
    if (m_driver->on_tick(clock::now(), m_cancel) && m_interrupt) {
        m_interrupt();
    }
    if (!finish_if_done()) {
        arm();
    }
}

bool kernel_session::finish_if_done() {
    if (!m_driver || !m_driver->finished(clock::now())) {
        return false;
    }
    const std::unique_ptr<jupyter::execution_driver> finished = std::move(m_driver);
    m_timer.stop();
    auto done = std::move(m_done);
    m_done = nullptr;
    m_interrupt = nullptr;
    if (done) {
        done(); // may destroy this session
    }
    return true;
}

void kernel_session::on_message(kernel_port from, message_parts parts) {
    if (!m_driver || from == kernel_port::control || from == kernel_port::stdin_port) {
        return;
    }
    // protocol::parse reads the parts as every client does; kernel_channels checked the signature.
    std::vector<std::string> frames{std::string(protocol::wire_delimiter), std::string()};
    frames.insert(frames.end(), std::make_move_iterator(parts.frames.begin()),
                  std::make_move_iterator(parts.frames.end()));
    auto msg = protocol::parse(frames, "");
    if (!msg) {
        return;
    }
    const auto channel =
        from == kernel_port::iopub ? jupyter::channel::iopub : jupyter::channel::shell;
    m_driver->on_message(jupyter::incoming{channel, std::move(msg).value()}, clock::now());
    if (!finish_if_done()) {
        arm(); // a cell begun or a reply in: the deadline may have moved
    }
}

} // namespace kpool::serve
