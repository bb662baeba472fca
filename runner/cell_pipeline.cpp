// cell_pipeline: sends a notebook's cells ahead where the kernel stops at an error by itself, and
// hands them to notebook_engine one at a time, in order.
#include "runner/cell_pipeline.hpp"

#include "languages/language.hpp"

#include <algorithm>

namespace kpool::runner {

using json = nlohmann::json;

std::optional<run_ahead_plan> run_ahead_for(const json& kernel_info) {
    if (!kernel_info.is_object()) {
        return std::nullopt;
    }
    const json& language_info = kernel_info.value("language_info", json::object());
    const std::string name = language_info.is_object() ? language_info.value("name", "") : "";
    const languages::language* row = languages::for_kernelspec(name);
    const std::string implementation = kernel_info.value("implementation", "");
    if (row == nullptr ||
        std::find(row->aborting_implementations.begin(), row->aborting_implementations.end(),
                  implementation) == row->aborting_implementations.end()) {
        return std::nullopt;
    }
    return run_ahead_plan{std::string(row->abort_window_expression)};
}

cell_pipeline::cell_pipeline(notebook_engine& engine, jupyter::send_execute_fn send,
                             std::size_t window, pipeline_hooks hooks)
    : m_engine(engine), m_send(std::move(send)), m_window(std::max<std::size_t>(window, 1)),
      m_hooks(std::move(hooks)) {}

void cell_pipeline::start(clock::time_point now) { advance(now); }

void cell_pipeline::on_message(const jupyter::incoming& in, clock::time_point now) {
    const std::string parent = in.msg.parent_msg_id();
    if (parent.empty()) {
        return;
    }
    for (std::size_t i = 0; i < m_sent.size(); ++i) {
        in_flight& request = m_sent[i];
        if (request.tracker.msg_id() != parent) {
            continue;
        }
        request.tracker.on_message(in, now);
        if (in.from == jupyter::channel::iopub) {
            if (i == 0 && m_front_begun) {
                const json output = m_engine.on_iopub(in.msg);
                if (m_hooks.iopub) {
                    m_hooks.iopub(in.msg, output);
                }
            } else {
                request.held.push_back(in.msg);
            }
        }
        break;
    }
    advance(now);
}

bool cell_pipeline::on_tick(clock::time_point now, bool cancelled) {
    const bool interrupt = m_front_begun && m_sent.front().tracker.on_tick(now, cancelled);
    advance(now);
    return interrupt;
}

void cell_pipeline::kernel_died(clock::time_point now) {
    for (in_flight& request : m_sent) {
        request.tracker.kernel_died();
    }
    advance(now);
}

std::optional<cell_pipeline::clock::time_point> cell_pipeline::next_deadline() const {
    return m_front_begun ? m_sent.front().tracker.next_deadline() : std::nullopt;
}

void cell_pipeline::advance(clock::time_point now) {
    while (!m_finished) {
        if (m_front_begun) {
            in_flight& running = m_sent.front();
            if (!running.tracker.finished(now)) {
                send_more(now);
                return;
            }
            const jupyter::execution& done = running.tracker.result();
            if (!m_window_widened && done.reply.is_object()) {
                const nlohmann::json& values = done.reply.value("user_expressions", json::object());
                m_window_widened = values.is_object() && values.contains(window_expression_name) &&
                                   values[window_expression_name].value("status", "") == "ok";
            }
            m_engine.on_executed(done);
            m_engine.end_cell(wall_clock::now());
            const std::size_t cell = running.cell;
            m_sent.pop_front();
            m_front_begun = false;
            if (m_hooks.ended) {
                m_hooks.ended(cell);
            }
            continue;
        }
        const auto next = m_engine.next_cell();
        if (!next) {
            // Requests still sent are the kernel's to abort (they queued behind the error that
            // stopped the run) or are cells never begun: nobody applies their messages.
            m_finished = true;
            return;
        }
        send_more(now); // first, so that the kernel has it while the bookkeeping below goes on
        const auto request = m_engine.begin_cell(wall_clock::now());
        if (m_hooks.began) {
            m_hooks.began(*next);
        }
        if (!request) { // markdown, blank, skip-execution: begun and ended at once, as papermill
            m_engine.end_cell(wall_clock::now());
            if (m_hooks.ended) {
                m_hooks.ended(*next);
            }
            continue;
        }
        // send_more sent the cells with code in order from the first not yet run: the front.
        in_flight& running = m_sent.front();
        m_front_begun = true;
        running.tracker.count_limit_from(now);
        for (const protocol::wire_message& msg : running.held) {
            const json output = m_engine.on_iopub(msg);
            if (m_hooks.iopub) {
                m_hooks.iopub(msg, output);
            }
        }
        running.held.clear();
    }
}

void cell_pipeline::send_more(clock::time_point now) {
    const auto next = m_engine.next_cell();
    if (!next) {
        return;
    }
    may_send_ahead(); // decides m_plan once kernel_info is known
    const std::size_t cells = m_engine.cell_count();
    m_scan = std::max(m_scan, *next);
    while (m_sent.size() < m_window) {
        const bool ahead = !m_sent.empty();
        if (ahead && (!m_sent.back().stops_on_error || !may_send_ahead())) {
            // Behind a request that may raise without stopping the kernel (an interrupt at its
            // time limit would not abort what waits behind it), to a kernel that does not
            // surely abort, or before its abort window is known to be wide: one at a time.
            return;
        }
        std::optional<jupyter::execute_request> request;
        while (m_scan < cells && !(request = m_engine.request_for(m_scan))) {
            ++m_scan;
        }
        if (!request) {
            return;
        }
        if (!ahead && request->stop_on_error && m_plan && !m_window_widened &&
            !m_plan->abort_window_expression.empty()) {
            // Evaluated after this cell, if it raises nothing; the cells behind it wait for its
            // reply, so that none is at the kernel before the window is wide. Not on a cell that
            // nothing may follow (allow_errors, raises-exception): the kernel is left as it is.
            request->user_expressions = {{window_expression_name, m_plan->abort_window_expression}};
        }
        const std::string id = m_send(*request);
        m_sent.push_back({m_scan,
                          request->stop_on_error,
                          jupyter::execution_tracker(id, request->timeout, now),
                          {}});
        m_sent_ahead += ahead ? 1 : 0;
        ++m_scan;
    }
}

bool cell_pipeline::may_send_ahead() {
    if (m_window <= 1) {
        return false;
    }
    if (!m_decided) {
        static const json none;
        const json& info = m_hooks.kernel_info ? m_hooks.kernel_info() : none;
        if (!info.is_object()) {
            return false; // not known yet: asked again when the next request goes
        }
        m_plan = run_ahead_for(info);
        m_decided = true;
    }
    return m_plan && (m_window_widened || m_plan->abort_window_expression.empty());
}

} // namespace kpool::runner
