// execution_tracker: the end of an execute_request, decided from its messages and the clock.
#include "jupyter/execution_tracker.hpp"

namespace kpool::jupyter {
namespace {

using namespace std::chrono_literals;

constexpr auto after_cancel = 5000ms;   // for the interrupted cell's last messages
constexpr auto after_timeout = 10000ms; // an interrupt may take a while to land in C code
constexpr auto after_reply = 5000ms;    // idle follows the reply at once, normally

} // namespace

execution_tracker::execution_tracker(std::string msg_id,
                                     std::optional<std::chrono::milliseconds> timeout,
                                     clock::time_point now)
    : m_id(std::move(msg_id)), m_timeout(timeout) {
    count_limit_from(now);
}

void execution_tracker::count_limit_from(clock::time_point now) {
    if (m_timeout && !m_out.timed_out) {
        m_limit = now + *m_timeout;
    }
}

bool execution_tracker::on_message(const incoming& in, clock::time_point now) {
    if (in.msg.parent_msg_id() != m_id) {
        return false;
    }
    if (in.from == channel::iopub) {
        if (in.msg.msg_type() == "status" &&
            in.msg.content.value("execution_state", "") == "idle") {
            m_idle = true;
        }
    } else if (in.from == channel::shell && in.msg.msg_type() == "execute_reply" &&
               m_out.reply.is_null()) {
        m_out.reply = in.msg.content;
        m_out.reply_header = in.msg.header;
        if (!m_grace_end) {
            m_grace_end = now + after_reply;
        }
    }
    return true;
}

bool execution_tracker::on_tick(clock::time_point now, bool cancelled) {
    bool interrupt = false;
    if (cancelled && !m_out.cancelled) {
        m_out.cancelled = true;
        m_grace_end = now + after_cancel;
        interrupt = true;
    }
    if (m_limit && now >= *m_limit && !m_out.timed_out && m_out.reply.is_null()) {
        m_out.timed_out = true;
        m_grace_end = now + after_timeout;
        interrupt = true;
    }
    return interrupt;
}

void execution_tracker::kernel_died() { m_out.kernel_died = true; }

bool execution_tracker::finished(clock::time_point now) const {
    return m_out.kernel_died || (!m_out.reply.is_null() && m_idle) ||
           (m_grace_end && now >= *m_grace_end);
}

std::optional<execution_tracker::clock::time_point> execution_tracker::next_deadline() const {
    if (m_grace_end) {
        return m_grace_end;
    }
    if (m_limit && !m_out.timed_out && m_out.reply.is_null()) {
        return m_limit;
    }
    return std::nullopt;
}

nlohmann::json execute_request_content(const execute_request& request) {
    return {{"code", request.code},
            {"silent", request.silent},
            {"store_history", request.store_history},
            {"user_expressions", request.user_expressions.is_object() ? request.user_expressions
                                                                      : nlohmann::json::object()},
            {"allow_stdin", false},
            {"stop_on_error", request.stop_on_error}};
}

} // namespace kpool::jupyter
