// upgrade_v3: nbformat's v3 reader (lines joined) and v4 converter, field for field.
#include "notebook/v3_upgrade.hpp"

#include "protocol/hmac.hpp"

#include <array>
#include <sstream>
#include <utility>

namespace kpool::notebook {
namespace {

using json = nlohmann::json;

// nbformat.v3's _join_lines on one field.
void join(json& object, const char* key) {
    auto it = object.find(key);
    if (it != object.end() && it->is_array()) {
        std::string text;
        for (const json& line : *it) {
            if (line.is_string()) {
                text += line.get<std::string>();
            }
        }
        *it = text;
    }
}

// nbformat.v3's _mime_map, short key -> mime type.
constexpr std::array<std::pair<const char*, const char*>, 8> mime_map = {{
    {"text", "text/plain"},
    {"html", "text/html"},
    {"svg", "image/svg+xml"},
    {"png", "image/png"},
    {"jpeg", "image/jpeg"},
    {"latex", "text/latex"},
    {"json", "application/json"},
    {"javascript", "application/javascript"},
}};

void to_mime_keys(json& d) {
    if (!d.is_object()) {
        return;
    }
    for (const auto& [alias, mime] : mime_map) {
        if (auto it = d.find(alias); it != d.end()) {
            json value = std::move(*it);
            d.erase(alias);
            d[mime] = std::move(value);
        }
    }
}

json upgrade_output(json output) {
    for (const char* key : {"text", "html", "svg", "latex", "javascript", "json"}) {
        join(output, key);
    }
    const std::string type = output.value("output_type", "");
    if (type == "pyout" || type == "display_data") {
        if (!output.contains("metadata")) {
            output["metadata"] = json::object();
        }
        if (type == "pyout") {
            output["output_type"] = "execute_result";
            output["execution_count"] =
                output.contains("prompt_number") ? output["prompt_number"] : json();
            output.erase("prompt_number");
        }
        json data = json::object();
        for (auto it = output.begin(); it != output.end();) {
            if (it.key() == "output_type" || it.key() == "execution_count" ||
                it.key() == "metadata") {
                ++it;
                continue;
            }
            data[it.key()] = it.value();
            it = output.erase(it);
        }
        to_mime_keys(data);
        output["data"] = std::move(data);
        to_mime_keys(output["metadata"]);
        json& d = output["data"];
        if (auto j = d.find("application/json"); j != d.end() && j->is_string()) {
            *j = json::parse(j->get<std::string>(), nullptr, false);
        }
    } else if (type == "pyerr") {
        output["output_type"] = "error";
    } else if (type == "stream") {
        output["name"] = output.value("stream", std::string("stdout"));
        output.erase("stream");
    }
    return output;
}

json upgrade_cell(json cell) {
    if (!cell.contains("metadata") || !cell["metadata"].is_object()) {
        cell["metadata"] = json::object();
    }
    cell["id"] = protocol::random_hex(4);
    for (const char* key : {"input", "source"}) {
        join(cell, key);
    }
    const std::string type = cell.value("cell_type", "");
    if (type == "code") {
        cell.erase("language");
        if (cell.contains("collapsed")) {
            cell["metadata"]["collapsed"] = cell["collapsed"];
            cell.erase("collapsed");
        }
        cell["source"] = cell.value("input", std::string());
        cell.erase("input");
        cell["execution_count"] = cell.contains("prompt_number") ? cell["prompt_number"] : json();
        cell.erase("prompt_number");
        json outputs = json::array();
        for (json& o : cell.value("outputs", json::array())) {
            outputs.push_back(upgrade_output(std::move(o)));
        }
        cell["outputs"] = std::move(outputs);
    } else if (type == "heading") {
        cell["cell_type"] = "markdown";
        const int level = cell.value("level", 1);
        cell.erase("level");
        // ' '.join(source.splitlines())
        std::istringstream lines(cell.value("source", std::string()));
        std::string single;
        for (std::string line; std::getline(lines, line);) {
            if (!line.empty() && line.back() == '\r') {
                line.pop_back();
            }
            single += (single.empty() ? "" : " ") + line;
        }
        cell["source"] =
            std::string(static_cast<std::size_t>(std::max(level, 0)), '#') + " " + single;
    } else if (type == "html") {
        cell["cell_type"] = "markdown";
    }
    return cell;
}

} // namespace

result<json> upgrade_v3(json nb, const std::string& source) {
    if (!nb.contains("worksheets") || !nb["worksheets"].is_array()) {
        return error{errc::bad_request,
                     source + ": not an nbformat 3 notebook (no 'worksheets' list)"};
    }
    if (!nb.contains("metadata") || !nb["metadata"].is_object()) {
        nb["metadata"] = json::object();
    }
    json& meta = nb["metadata"];
    meta["orig_nbformat"] = nb.contains("orig_nbformat") ? nb["orig_nbformat"] : json(3);
    meta["orig_nbformat_minor"] =
        nb.contains("orig_nbformat_minor") ? nb["orig_nbformat_minor"] : json(0);
    nb.erase("orig_nbformat");
    nb.erase("orig_nbformat_minor");
    nb["nbformat"] = 4;
    nb["nbformat_minor"] = 5;
    json cells = json::array();
    for (json& ws : nb["worksheets"]) {
        if (!ws.is_object() || !ws.contains("cells") || !ws["cells"].is_array()) {
            return error{errc::bad_request,
                         source + ": an nbformat 3 worksheet without a 'cells' list"};
        }
        for (json& cell : ws["cells"]) {
            if (!cell.is_object()) {
                return error{errc::bad_request,
                             source + ": a cell is not an object with a cell_type"};
            }
            cells.push_back(upgrade_cell(std::move(cell)));
        }
    }
    nb.erase("worksheets");
    nb["cells"] = std::move(cells);
    meta.erase("name");
    meta.erase("signature");
    return nb;
}

} // namespace kpool::notebook
