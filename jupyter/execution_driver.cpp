// single_execution and the blocking pump (drive, and execute on top of it).
#include "jupyter/execution_driver.hpp"

#include <algorithm>

namespace kpool::jupyter {

using namespace std::chrono_literals;

single_execution::single_execution(send_execute_fn send, execute_request request,
                                   std::function<void(const protocol::wire_message&)> on_iopub)
    : m_send(std::move(send)), m_request(std::move(request)), m_on_iopub(std::move(on_iopub)) {}

void single_execution::start(clock::time_point now) {
    m_tracker.emplace(m_send(m_request), m_request.timeout, now);
}

void single_execution::on_message(const incoming& in, clock::time_point now) {
    if (m_tracker && m_tracker->on_message(in, now) && in.from == channel::iopub && m_on_iopub) {
        m_on_iopub(in.msg);
    }
}

bool single_execution::on_tick(clock::time_point now, bool cancelled) {
    return m_tracker && m_tracker->on_tick(now, cancelled);
}

void single_execution::kernel_died(clock::time_point) {
    if (m_tracker) {
        m_tracker->kernel_died();
    }
}

bool single_execution::finished(clock::time_point now) const {
    return !m_tracker || m_tracker->finished(now);
}

std::optional<execution_driver::clock::time_point> single_execution::next_deadline() const {
    return m_tracker ? m_tracker->next_deadline() : std::nullopt;
}

const execution& single_execution::result() const {
    static const execution none;
    return m_tracker ? m_tracker->result() : none;
}

void drive(kernel_client& client, execution_driver& driver, const execute_hooks& hooks) {
    using clock = execution_driver::clock;
    driver.start(clock::now());
    while (!driver.finished(clock::now())) {
        // A second at most: a cancel is asked for, and a silent kernel's life checked, that often.
        auto wait = 1000ms;
        if (const auto deadline = driver.next_deadline()) {
            wait = std::clamp(
                std::chrono::ceil<std::chrono::milliseconds>(*deadline - clock::now()), 0ms, wait);
        }
        auto got = client.receive(wait);
        const auto now = clock::now();
        if (driver.on_tick(now, hooks.cancelled && hooks.cancelled()) && hooks.interrupt) {
            hooks.interrupt();
        }
        if (got) {
            driver.on_message(*got, now);
        } else if (wait == 1000ms && hooks.alive && !hooks.alive()) {
            driver.kernel_died(now);
        }
    }
}

execution execute(kernel_client& client, const execute_request& request,
                  const execute_hooks& hooks) {
    single_execution one(
        [&client](const execute_request& r) {
            return client.send(channel::shell, "execute_request", execute_request_content(r));
        },
        request, hooks.on_iopub);
    drive(client, one, hooks);
    return one.result();
}

} // namespace kpool::jupyter
