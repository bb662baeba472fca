// Cell outputs from a kernel's iopub messages, built exactly as nbclient 0.7 builds them: one
// output per stream, display_data, execute_result or error message (nbformat's
// output_from_msg), clear_output (with wait: at the next output), and display_data /
// update_display_data with a display_id updating every earlier output of that id, in any cell.
// Pure code: messages in, JSON outputs (in-memory nbformat) out.
#pragma once

#include "protocol/wire.hpp"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <map>
#include <string>
#include <vector>

namespace kpool::notebook {

// nbformat's output_from_msg: the output for a message of type execute_result, display_data
// (also update_display_data), stream or error; null for any other type.
nlohmann::json output_from_msg(const std::string& msg_type, const nlohmann::json& content);

class output_builder {
public:
    // `cells` is the notebook's cells array (in-memory form); it must outlive the builder.
    explicit output_builder(nlohmann::json& cells) : m_cells(cells) {}

    // Applies one iopub message for cell `cell_index`. Sets the cell's execution_count when the
    // message has one. Returns the output appended, or null.
    nlohmann::json apply(const protocol::wire_message& msg, std::size_t cell_index);

private:
    void update_display(const std::string& display_id, const nlohmann::json& output);
    void clear(std::size_t cell_index);

    nlohmann::json& m_cells;
    bool m_clear_before_next_output = false; // nbclient keeps it per notebook, not per cell
    // display_id -> cell index -> indices into that cell's outputs
    std::map<std::string, std::map<std::size_t, std::vector<std::size_t>>> m_display_ids;
};

} // namespace kpool::notebook
