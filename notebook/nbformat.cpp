// nbformat 4 reading (rejoin_lines, strip_transient) and writing (split_lines, json.dumps with
// indent=1, sort_keys, ensure_ascii=False), matching nbformat 5's v4 reader and writer.
#include "notebook/nbformat.hpp"

#include "notebook/v3_upgrade.hpp"
#include "protocol/big_integer.hpp"
#include "protocol/python_float.hpp"
#include "protocol/python_json.hpp"

#include <algorithm>
#include <cmath>

namespace kpool::notebook {
namespace {

using json = nlohmann::json;

// Mime types whose string values nbformat splits on write: text/* and two others.
bool splits_mime(const std::string& key) {
    return key.starts_with("text/") || key == "application/javascript" || key == "image/svg+xml";
}

// On read, lists are joined for every mime type but JSON ones (those hold JSON values).
bool joins_mime(const std::string& key) {
    return key != "application/json" &&
           !(key.starts_with("application/") && key.ends_with("+json"));
}

// Joins a list of strings into one string (nbformat's rejoin_lines); other values unchanged.
void join_if_list(json& value) {
    if (value.is_array() &&
        std::all_of(value.begin(), value.end(), [](const json& v) { return v.is_string(); })) {
        std::string joined;
        for (const json& part : value) {
            joined += part.get_ref<const std::string&>();
        }
        value = joined;
    }
}

void split_if_string(json& value) {
    if (value.is_string()) {
        json lines = json::array();
        for (std::string& line : split_lines(value.get_ref<const std::string&>())) {
            lines.push_back(std::move(line));
        }
        value = std::move(lines);
    }
}

template <class Fn>
void for_each_mimebundle_value(json& bundle, bool on_write, Fn fn) {
    if (!bundle.is_object()) {
        return;
    }
    for (auto& [key, value] : bundle.items()) {
        if (on_write ? splits_mime(key) : joins_mime(key)) {
            fn(value);
        }
    }
}

// Applies fn to every multi-line field of a notebook: what nbformat splits and joins.
template <class Fn>
void for_each_multiline_field(json& nb, bool on_write, Fn fn) {
    json& cells = nb["cells"];
    for (json& cell : cells) {
        if (!cell.is_object()) {
            continue;
        }
        if (auto source = cell.find("source"); source != cell.end()) {
            fn(*source);
        }
        if (auto att = cell.find("attachments"); att != cell.end() && att->is_object()) {
            for (auto& [name, bundle] : att->items()) {
                for_each_mimebundle_value(bundle, on_write, fn);
            }
        }
        if (cell.value("cell_type", "") != "code") {
            continue;
        }
        auto outputs = cell.find("outputs");
        if (outputs == cell.end() || !outputs->is_array()) {
            continue;
        }
        for (json& output : *outputs) {
            const std::string type = output.value("output_type", "");
            if (type == "execute_result" || type == "display_data") {
                if (auto data = output.find("data"); data != output.end()) {
                    for_each_mimebundle_value(*data, on_write, fn);
                }
            } else if (on_write ? type == "stream" : !type.empty()) {
                if (auto text = output.find("text"); text != output.end()) {
                    fn(*text);
                }
            }
        }
    }
}

void strip_transient(json& nb) {
    if (auto meta = nb.find("metadata"); meta != nb.end() && meta->is_object()) {
        meta->erase("orig_nbformat");
        meta->erase("orig_nbformat_minor");
        meta->erase("signature");
    }
    for (json& cell : nb["cells"]) {
        if (auto meta = cell.find("metadata"); meta != cell.end() && meta->is_object()) {
            meta->erase("trusted");
        }
    }
}

// "line:col" (1-based) of a byte offset.
std::string position_of(std::string_view text, std::size_t offset) {
    offset = std::min(offset, text.size());
    std::size_t line = 1;
    std::size_t col = 1;
    for (std::size_t i = 0; i < offset; ++i) {
        if (text[i] == '\n') {
            ++line;
            col = 1;
        } else if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) {
            ++col; // columns count characters, not UTF-8 continuation bytes
        }
    }
    return std::to_string(line) + ":" + std::to_string(col);
}

} // namespace

std::vector<std::string> split_lines(std::string_view text) {
    std::vector<std::string> lines;
    std::size_t start = 0;
    std::size_t i = 0;
    auto end_line = [&](std::size_t after) {
        lines.emplace_back(text.substr(start, after - start));
        start = after;
        i = after;
    };
    while (i < text.size()) {
        const auto c = static_cast<unsigned char>(text[i]);
        if (c == '\r') {
            end_line(i + 1 < text.size() && text[i + 1] == '\n' ? i + 2 : i + 1);
        } else if (c == '\n' || c == '\v' || c == '\f' || (c >= 0x1c && c <= 0x1e)) {
            end_line(i + 1);
        } else if (c == 0xC2 && i + 1 < text.size() &&
                   static_cast<unsigned char>(text[i + 1]) == 0x85) {
            end_line(i + 2); // U+0085 NEXT LINE
        } else if (c == 0xE2 && i + 2 < text.size() &&
                   static_cast<unsigned char>(text[i + 1]) == 0x80 &&
                   (static_cast<unsigned char>(text[i + 2]) == 0xA8 ||
                    static_cast<unsigned char>(text[i + 2]) == 0xA9)) {
            end_line(i + 3); // U+2028, U+2029
        } else {
            ++i;
        }
    }
    if (start < text.size()) {
        lines.emplace_back(text.substr(start));
    }
    return lines;
}

result<json> read_notebook(std::string_view text, const std::string& source) {
    json nb;
    try {
        nb = protocol::parse_python_json<json>(text); // NaN and big integers as Python reads them
    } catch (const json::parse_error& e) {
        const std::string what = e.what();
        const auto colon = what.find("; ");
        return error{errc::bad_request,
                     source + ":" + position_of(text, e.byte > 0 ? e.byte - 1 : 0) +
                         ": not valid JSON: " +
                         (colon == std::string::npos ? what : what.substr(colon + 2))};
    } catch (const json::exception& e) { // no other is known to come out of parsing; never a crash
        return error{errc::bad_request, source + ": not valid JSON: " + e.what()};
    }
    if (!nb.is_object()) {
        return error{errc::bad_request, source + ": not a notebook (the JSON is not an object)"};
    }
    auto major = nb.find("nbformat");
    if (major != nb.end() && major->is_number_integer() && major->get<int>() == 3) {
        auto upgraded = upgrade_v3(std::move(nb), source); // as nbformat.reads(as_version=4)
        if (!upgraded) {
            return upgraded.err();
        }
        nb = std::move(*upgraded);
        major = nb.find("nbformat");
    }
    if (major == nb.end() || !major->is_number_integer() || major->get<int>() != 4) {
        return error{errc::bad_request,
                     source + ": not an nbformat 4 notebook (nbformat is " +
                         (major == nb.end() ? std::string("missing") : major->dump()) + ")"};
    }
    if (!nb.contains("cells") || !nb["cells"].is_array()) {
        return error{errc::bad_request, source + ": not an nbformat 4 notebook (no 'cells' list)"};
    }
    if (!nb.contains("metadata") || !nb["metadata"].is_object()) {
        nb["metadata"] = json::object();
    }
    for (const json& cell : nb["cells"]) {
        if (!cell.is_object() || !cell.contains("cell_type")) {
            return error{errc::bad_request, source + ": a cell is not an object with a cell_type"};
        }
    }
    for_each_multiline_field(nb, false, join_if_list);
    strip_transient(nb);
    return nb;
}

namespace {

// json.dumps(indent=1, sort_keys=True, separators=(",", ": "), ensure_ascii=False). nlohmann
// keeps keys sorted by code point (UTF-8 byte order is the same) and escapes strings as Python
// does; floats are written here, as Python's repr (nlohmann's Grisu2 is not always shortest:
// 0.011508 can come out as 0.011507999999999999).
void write_json(const json& j, std::string& out, int depth) {
    auto newline = [&](int d) {
        out += '\n';
        out.append(static_cast<std::size_t>(d), ' ');
    };
    switch (j.type()) {
    case json::value_t::object: {
        if (j.empty()) {
            out += "{}";
            return;
        }
        out += '{';
        bool first = true;
        for (const auto& [key, value] : j.items()) {
            out += first ? "" : ",";
            first = false;
            newline(depth + 1);
            out += json(key).dump(-1, ' ', false, json::error_handler_t::replace);
            out += ": ";
            write_json(value, out, depth + 1);
        }
        newline(depth);
        out += '}';
        return;
    }
    case json::value_t::array: {
        if (j.empty()) {
            out += "[]";
            return;
        }
        out += '[';
        bool first = true;
        for (const json& value : j) {
            out += first ? "" : ",";
            first = false;
            newline(depth + 1);
            write_json(value, out, depth + 1);
        }
        newline(depth);
        out += ']';
        return;
    }
    case json::value_t::number_float: {
        const double d = j.get<double>();
        out += std::isnan(d)   ? "NaN"
               : std::isinf(d) ? (d < 0 ? "-Infinity" : "Infinity")
                               : protocol::python_float_repr(d);
        return;
    }
    case json::value_t::binary:
        if (protocol::is_big_integer(j)) { // a parameter beyond 64 bits, written exactly
            out += protocol::big_integer_digits(j);
            return;
        }
        out += j.dump(-1, ' ', false, json::error_handler_t::replace);
        return;
    default: out += j.dump(-1, ' ', false, json::error_handler_t::replace);
    }
}

} // namespace

std::string write_notebook(const json& in_memory) {
    json nb = in_memory;
    for_each_multiline_field(nb, true, split_if_string);
    strip_transient(nb);
    std::string out;
    write_json(nb, out, 0);
    return out + "\n";
}

json output_for_file(const json& output) {
    json out = output;
    const std::string type = out.value("output_type", "");
    if (type == "execute_result" || type == "display_data") {
        if (auto data = out.find("data"); data != out.end()) {
            for_each_mimebundle_value(*data, true, split_if_string);
        }
    } else if (type == "stream") {
        if (auto text = out.find("text"); text != out.end()) {
            split_if_string(*text);
        }
    }
    return out;
}

} // namespace kpool::notebook
