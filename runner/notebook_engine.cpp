// notebook_engine: papermill's rules for one cell at a time, applied to the in-memory notebook.
#include "runner/notebook_engine.hpp"

#include "params/values.hpp"

#include <algorithm>

namespace kpool::runner {
namespace {

bool blank(const std::string& s) { return s.find_first_not_of(" \t\n\r\f\v") == std::string::npos; }

} // namespace

notebook_engine::notebook_engine(json& nb, engine_settings settings)
    : m_nb(nb), m_settings(std::move(settings)), m_outputs(nb["cells"]) {}

std::optional<std::size_t> notebook_engine::next_cell() const {
    if (m_stop.outcome != run_outcome::ok || m_stopped_clean || m_next >= m_nb["cells"].size()) {
        return std::nullopt;
    }
    return m_next;
}

std::optional<jupyter::execute_request> notebook_engine::request_for(std::size_t index) const {
    const json& cells = m_nb["cells"];
    if (index >= cells.size()) {
        return std::nullopt;
    }
    const json& cell = cells[index];
    if (cell.value("cell_type", "") != "code" || blank(cell.value("source", "")) ||
        has_tag(cell, "skip-execution")) {
        return std::nullopt;
    }
    const bool allow = m_settings.allow_errors || has_tag(cell, "raises-exception");
    return jupyter::execute_request{.code = cell.value("source", ""),
                                    .silent = false,
                                    .store_history = true,
                                    .stop_on_error = !allow,
                                    .timeout = m_settings.execution_timeout};
}

std::optional<jupyter::execute_request> notebook_engine::begin_cell(wall_clock::time_point now) {
    const auto index = next_cell();
    if (!index) {
        return std::nullopt;
    }
    m_running = *index;
    json& cell = m_nb["cells"][*index];
    cell_start(cell, now);
    auto request = request_for(*index);
    if (!request) {
        return std::nullopt;
    }
    cell["metadata"]["execution"] = json::object();
    cell["outputs"] = json::array();
    m_allow = !request->stop_on_error;
    return request;
}

json notebook_engine::on_iopub(const protocol::wire_message& msg) {
    if (!m_running) {
        return nullptr;
    }
    json& cell = m_nb["cells"][*m_running];
    const std::string type = msg.msg_type();
    json& timing = cell["metadata"]["execution"];
    if (type == "status") {
        const std::string state = msg.content.value("execution_state", "");
        if (state == "busy" || state == "idle") {
            timing["iopub.status." + state] = message_time(msg.header);
        }
    } else if (type == "execute_input") {
        timing["iopub.execute_input"] = message_time(msg.header);
    }
    return m_outputs.apply(msg, *m_running);
}

void notebook_engine::on_executed(const jupyter::execution& done) {
    if (!m_running) {
        return;
    }
    const std::size_t index = *m_running;
    json& cell = m_nb["cells"][index];
    if (!done.reply.is_null()) {
        cell["metadata"]["execution"]["shell.execute_reply"] = message_time(done.reply_header);
    }
    m_cut_off = done.kernel_died || done.cancelled || done.timed_out;
    if (done.kernel_died) {
        // papermill: the cell stays "completed", no markers, exit 138 (DeadKernelError).
        m_stop = {run_outcome::kernel_died,
                  "the kernel died while running cell " + std::to_string(index)};
        return;
    }
    if (done.cancelled) {
        // papermill, stopped by Ctrl-C, leaves the cell "completed" and adds no error cells.
        m_stop = {run_outcome::interrupted,
                  "interrupted while running cell " + std::to_string(index)};
        return;
    }
    if (done.timed_out) {
        // papermill (nbclient's CellTimeoutError escapes it): the interrupt's output is kept,
        // the cell "completed", no markers, exit 1.
        const double s = std::chrono::duration<double>(
                             m_settings.execution_timeout.value_or(std::chrono::milliseconds(0)))
                             .count();
        m_stop = {run_outcome::cell_failed,
                  "cell " + std::to_string(index) +
                      ": A cell timed out while it was being executed, after " +
                      params::python_float_repr(s) + " seconds (the kernel was interrupted)."};
        return;
    }
    if (done.reply.value("status", "") != "error") {
        return;
    }
    const std::string ename = done.reply.value("ename", "");
    const std::string evalue = done.reply.value("evalue", "");
    if (ename == "SystemExit" && (evalue.empty() || evalue == "0")) {
        // sys.exit() / sys.exit(0): the run ends and succeeds, though papermill marks the cell
        // failed (and the notebook's exception) and leaves the rest pending.
        cell_exception(m_nb, cell);
        m_stopped_clean = true;
        return;
    }
    if (!m_allow) {
        cell_exception(m_nb, cell);
        m_failed = static_cast<long>(index);
        m_stop = {run_outcome::cell_failed, ""};
    }
}

void notebook_engine::end_cell(wall_clock::time_point now) {
    if (!m_running) {
        return;
    }
    cell_complete(m_nb["cells"][*m_running], now);
    m_next = *m_running + 1;
    m_running.reset();
}

void notebook_engine::finish(wall_clock::time_point start, wall_clock::time_point now) {
    notebook_complete(m_nb, start, now);
    if (m_stop.outcome == run_outcome::cell_failed && m_failed >= 0) {
        const auto index = static_cast<std::size_t>(m_failed);
        insert_error_cells(m_nb, index, m_nb["cells"][index].value("execution_count", json()));
    }
}

} // namespace kpool::runner
