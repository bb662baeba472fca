// output_builder: nbclient's process_message / output / clear_output / _update_display_id.
#include "notebook/outputs.hpp"

namespace kpool::notebook {
namespace {

using json = nlohmann::json;

json object_or_empty(const json& content, const char* key) {
    auto it = content.find(key);
    return it != content.end() && it->is_object() ? *it : json::object();
}

} // namespace

json output_from_msg(const std::string& msg_type, const json& content) {
    if (msg_type == "execute_result") {
        return {{"output_type", "execute_result"},
                {"data", object_or_empty(content, "data")},
                {"metadata", object_or_empty(content, "metadata")},
                {"execution_count", content.value("execution_count", json(nullptr))}};
    }
    if (msg_type == "display_data" || msg_type == "update_display_data") {
        return {{"output_type", "display_data"},
                {"data", object_or_empty(content, "data")},
                {"metadata", object_or_empty(content, "metadata")}};
    }
    if (msg_type == "stream") {
        return {{"output_type", "stream"},
                {"name", content.value("name", std::string("stdout"))},
                {"text", content.value("text", std::string())}};
    }
    if (msg_type == "error") {
        return {{"output_type", "error"},
                {"ename", content.value("ename", std::string())},
                {"evalue", content.value("evalue", std::string())},
                {"traceback", content.value("traceback", json::array())}};
    }
    return nullptr;
}

json output_builder::apply(const protocol::wire_message& msg, std::size_t cell_index) {
    const std::string type = msg.msg_type();
    const json& content = msg.content;
    json& cell = m_cells.at(cell_index);
    std::string display_id;
    if (auto t = content.find("transient"); t != content.end() && t->is_object()) {
        if (auto id = t->find("display_id"); id != t->end() && id->is_string()) {
            display_id = id->get<std::string>();
        }
    }
    if (!display_id.empty() &&
        (type == "execute_result" || type == "display_data" || type == "update_display_data")) {
        update_display(display_id, output_from_msg(type, content));
    }
    if (content.contains("execution_count")) {
        cell["execution_count"] = content["execution_count"];
    }
    if (type == "clear_output") {
        if (content.value("wait", false)) {
            m_clear_before_next_output = true;
        } else {
            cell["outputs"] = json::array();
            clear(cell_index);
        }
        return nullptr;
    }
    if (type == "status" || type == "execute_input" || type == "update_display_data" ||
        type.starts_with("comm")) {
        return nullptr;
    }
    json out = output_from_msg(type, content);
    if (out.is_null()) {
        return nullptr; // nbclient logs "unhandled iopub msg" and goes on
    }
    json& outs = cell["outputs"];
    if (m_clear_before_next_output) {
        outs = json::array();
        clear(cell_index);
        m_clear_before_next_output = false;
    }
    if (!display_id.empty()) {
        m_display_ids[display_id][cell_index].push_back(outs.size());
    }
    outs.push_back(out);
    return out;
}

void output_builder::update_display(const std::string& display_id, const json& output) {
    auto it = m_display_ids.find(display_id);
    if (it == m_display_ids.end()) {
        return;
    }
    for (const auto& [cell_index, indices] : it->second) {
        json& outs = m_cells.at(cell_index)["outputs"];
        for (std::size_t i : indices) {
            if (i < outs.size()) {
                outs[i]["data"] = output["data"];
                outs[i]["metadata"] = output["metadata"];
            }
        }
    }
}

void output_builder::clear(std::size_t cell_index) {
    for (auto& [id, cells] : m_display_ids) {
        if (auto it = cells.find(cell_index); it != cells.end()) {
            it->second.clear();
        }
    }
}

} // namespace kpool::notebook
