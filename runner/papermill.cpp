// papermill's notebook bookkeeping (execute.py, parameterize.py, engines.py), rewritten.
#include "runner/papermill.hpp"

#include "protocol/hmac.hpp"

#include <algorithm>
#include <cstdio>
#include <ctime>

namespace kpool::runner {
namespace {

constexpr const char* error_style =
    "style=\"color:red; font-family:Helvetica Neue, Helvetica, Arial, sans-serif; font-size:2em;\"";

std::string format_utc(std::time_t seconds, long micros, bool always_fraction, const char* suffix) {
    std::tm tm{};
    ::gmtime_r(&seconds, &tm);
    char buf[64];
    std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%S", &tm);
    std::string out = buf;
    if (micros != 0 || always_fraction) {
        std::snprintf(buf, sizeof buf, ".%06ld", micros);
        out += buf;
    }
    return out + suffix;
}

json& papermill_of(json& cell) {
    json& meta = cell["metadata"];
    if (!meta.is_object()) {
        meta = json::object();
    }
    return meta["papermill"];
}

double seconds_between(const std::string& start, wall_clock::time_point end) {
    // Our own start times: parse "YYYY-MM-DDTHH:MM:SS[.ffffff]" back (UTC).
    std::tm tm{};
    long micros = 0;
    int fraction_digits = 0;
    if (std::sscanf(start.c_str(), "%d-%d-%dT%d:%d:%d.%6ld%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                    &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &micros, &fraction_digits) < 6) {
        return 0;
    }
    tm.tm_year -= 1900;
    tm.tm_mon -= 1;
    const auto t = wall_clock::from_time_t(::timegm(&tm)) + std::chrono::microseconds(micros);
    return std::chrono::duration<double>(std::chrono::floor<std::chrono::microseconds>(end) - t)
        .count();
}

} // namespace

std::string papermill_time(wall_clock::time_point t) {
    const auto us = std::chrono::time_point_cast<std::chrono::microseconds>(t);
    const auto seconds = std::chrono::floor<std::chrono::seconds>(us);
    return format_utc(wall_clock::to_time_t(seconds), static_cast<long>((us - seconds).count()),
                      false, "");
}

std::string message_time(const json& header) {
    if (auto date = header.find("date"); date != header.end() && date->is_string()) {
        // Kernels write ISO 8601 with 3 to 6 fraction digits and a Z or +00:00; nbclient parses
        // and rewrites it with six digits and a Z.
        const std::string d = date->get<std::string>();
        int y, mo, da, h, mi, s;
        char rest[64] = {};
        if (std::sscanf(d.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%63s", &y, &mo, &da, &h, &mi, &s,
                        rest) >= 6) {
            std::string frac;
            if (rest[0] == '.') {
                for (const char* p = rest + 1; *p >= '0' && *p <= '9'; ++p) {
                    frac += *p;
                }
            }
            frac = (frac + "000000").substr(0, 6);
            char buf[64];
            std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%sZ", y, mo, da, h, mi, s,
                          frac.c_str());
            return buf;
        }
    }
    const auto us = std::chrono::time_point_cast<std::chrono::microseconds>(wall_clock::now());
    const auto seconds = std::chrono::floor<std::chrono::seconds>(us);
    return format_utc(wall_clock::to_time_t(seconds), static_cast<long>((us - seconds).count()),
                      true, "Z");
}

std::string nb_kernel_name(const json& nb, const std::string& override_name) {
    if (!override_name.empty()) {
        return override_name;
    }
    const json& spec = nb.value("metadata", json::object()).value("kernelspec", json::object());
    return spec.is_object() ? spec.value("name", "") : "";
}

std::string nb_language(const json& nb, const std::string& override_language,
                        const std::string& fallback) {
    if (!override_language.empty()) {
        return override_language;
    }
    const json& meta = nb.value("metadata", json::object());
    if (auto spec = meta.find("kernelspec");
        spec != meta.end() && spec->is_object() && spec->value("language", json()).is_string()) {
        return (*spec)["language"].get<std::string>();
    }
    if (auto info = meta.find("language_info");
        info != meta.end() && info->is_object() && info->value("name", json()).is_string()) {
        return (*info)["name"].get<std::string>();
    }
    return fallback;
}

bool has_tag(const json& cell, const std::string& tag) {
    const json& tags = cell.value("metadata", json::object()).value("tags", json::array());
    return tags.is_array() && std::find(tags.begin(), tags.end(), json(tag)) != tags.end();
}

long first_tagged_cell(const json& nb, const std::string& tag) {
    const json& cells = nb["cells"];
    for (std::size_t i = 0; i < cells.size(); ++i) {
        if (has_tag(cells[i], tag)) {
            return static_cast<long>(i);
        }
    }
    return -1;
}

std::string new_cell_id() { return protocol::random_hex(4); }

void inject_parameters(json& nb, const std::string& source, std::vector<std::string>& warnings) {
    json cell = {{"cell_type", "code"},
                 {"execution_count", nullptr},
                 {"metadata", {{"tags", {"injected-parameters"}}}},
                 {"outputs", json::array()},
                 {"source", source}};
    if (nb.value("nbformat_minor", 0) >= 5) {
        cell["id"] = new_cell_id();
    }
    json& cells = nb["cells"];
    const long injected = first_tagged_cell(nb, "injected-parameters");
    const long params = first_tagged_cell(nb, "parameters");
    if (injected >= 0) {
        cells[static_cast<std::size_t>(injected)] = cell;
    } else if (params >= 0) {
        cells.insert(cells.begin() + params + 1, cell);
    } else {
        warnings.push_back("Input notebook does not contain a cell with tag 'parameters'");
        cells.insert(cells.begin(), cell);
    }
}

// An ordered_json value as a json one, NaN and infinities kept (text would make them null).
static json plain_json(const nlohmann::ordered_json& v) {
    if (v.is_object()) {
        json out = json::object();
        for (const auto& [k, item] : v.items()) {
            out[k] = plain_json(item);
        }
        return out;
    }
    if (v.is_array()) {
        json out = json::array();
        for (const auto& item : v) {
            out.push_back(plain_json(item));
        }
        return out;
    }
    switch (v.type()) {
    case nlohmann::ordered_json::value_t::number_float: return v.get<double>();
    case nlohmann::ordered_json::value_t::number_integer: return v.get<std::int64_t>();
    case nlohmann::ordered_json::value_t::number_unsigned: return v.get<std::uint64_t>();
    case nlohmann::ordered_json::value_t::boolean: return v.get<bool>();
    case nlohmann::ordered_json::value_t::string: return v.get<std::string>();
    case nlohmann::ordered_json::value_t::binary: { // big integers (protocol/big_integer.hpp)
        const auto& bytes = v.get_binary();
        json::binary_t::container_type copy(bytes.begin(), bytes.end());
        return bytes.has_subtype() ? json::binary(std::move(copy), bytes.subtype())
                                   : json::binary(std::move(copy));
    }
    default: return nullptr;
    }
}

void load_notebook(json& nb, const std::string& version) {
    if (nb.value("nbformat", 0) == 4 && nb.value("nbformat_minor", 0) < 5) {
        nb["nbformat_minor"] = 5; // nbformat.v4.upgrade: 4.5, every cell with an id
        for (json& cell : nb["cells"]) {
            if (!cell.contains("id")) {
                cell["id"] = new_cell_id();
            }
        }
    }
    json& meta = nb["metadata"];
    if (!meta.contains("papermill")) {
        meta["papermill"] = {{"default_parameters", json::object()},
                             {"parameters", json::object()},
                             {"environment_variables", json::object()},
                             {"version", version}};
    }
    for (json& cell : nb["cells"]) {
        json& cm = cell["metadata"];
        if (!cm.is_object()) {
            cm = json::object();
        }
        if (!cm.contains("tags")) {
            cm["tags"] = json::array();
        }
        if (!cm.contains("papermill")) {
            cm["papermill"] = json::object();
        }
    }
}

void prepare_metadata(json& nb, const std::string& input_path, const std::string& output_path,
                      const nlohmann::ordered_json& parameters, const json& environment,
                      const std::string& version) {
    json& pm = nb["metadata"]["papermill"];
    if (!pm.is_object()) {
        pm = json::object();
    }
    pm["input_path"] = input_path;
    pm["output_path"] = output_path;
    if (!parameters.empty()) { // a run without parameters keeps the ones recorded before
        pm["parameters"] = plain_json(parameters); // not through text: NaN and inf survive
    }
    if (!environment.empty()) {
        pm["environment_variables"] = environment;
    }
    pm["version"] = version;
}

void notebook_start(json& nb, wall_clock::time_point now) {
    json& pm = nb["metadata"]["papermill"];
    pm["start_time"] = papermill_time(now);
    pm["end_time"] = nullptr;
    pm["duration"] = nullptr;
    pm["exception"] = nullptr;
    for (json& cell : nb["cells"]) {
        if (cell.contains("execution_count") && !cell["execution_count"].is_null()) {
            cell["execution_count"] = nullptr;
        }
        papermill_of(cell) = {{"exception", nullptr},
                              {"start_time", nullptr},
                              {"end_time", nullptr},
                              {"duration", nullptr},
                              {"status", "pending"}};
        if (cell.contains("outputs")) {
            cell["outputs"] = json::array();
        }
    }
}

void cell_start(json& cell, wall_clock::time_point now) {
    json& pm = papermill_of(cell);
    pm["start_time"] = papermill_time(now);
    pm["status"] = "running";
    pm["exception"] = false;
}

void cell_exception(json& nb, json& cell) {
    json& pm = papermill_of(cell);
    pm["exception"] = true;
    pm["status"] = "failed";
    nb["metadata"]["papermill"]["exception"] = true;
}

void cell_complete(json& cell, wall_clock::time_point now) {
    json& pm = papermill_of(cell);
    pm["end_time"] = papermill_time(now);
    if (pm.value("start_time", json()).is_string()) {
        pm["duration"] = seconds_between(pm["start_time"].get<std::string>(), now);
    }
    if (pm.value("status", "") != "failed") {
        pm["status"] = "completed";
    }
}

void notebook_complete(json& nb, wall_clock::time_point start, wall_clock::time_point now) {
    json& pm = nb["metadata"]["papermill"];
    pm["end_time"] = papermill_time(now);
    pm["duration"] =
        std::chrono::duration<double>(std::chrono::floor<std::chrono::microseconds>(now) -
                                      std::chrono::floor<std::chrono::microseconds>(start))
            .count();
    for (json& cell : nb["cells"]) {
        json& cpm = papermill_of(cell);
        if (cpm.value("status", "") == "failed") {
            break;
        }
        if (cpm.value("status", "") == "pending") {
            cpm["status"] = "completed";
        }
    }
}

void remove_error_markers(json& nb) {
    json& cells = nb["cells"];
    json kept = json::array();
    for (json& cell : cells) {
        const json& tags = cell.value("metadata", json::object()).value("tags", json::array());
        if (!(tags.is_array() &&
              std::find(tags.begin(), tags.end(), json(error_marker_tag)) != tags.end())) {
            kept.push_back(std::move(cell));
        }
    }
    cells = std::move(kept);
}

void hide_inputs(json& nb) {
    for (json& cell : nb["cells"]) {
        if (cell.value("cell_type", "") == "code") {
            // papermill writes cell.get('jupyter', {}) (a key cells never have) over what was
            // there.
            cell["metadata"]["jupyter"] = {{"source_hidden", true}};
        }
    }
}

void insert_error_cells(json& nb, std::size_t failed_cell, const json& execution_count) {
    const std::string count = execution_count.is_null() ? "None" : execution_count.dump();
    auto marker = [&](std::string source) {
        json cell = {{"cell_type", "markdown"},
                     {"metadata", {{"tags", {error_marker_tag}}}},
                     {"source", std::move(source)}};
        if (nb.value("nbformat_minor", 0) >= 5) {
            cell["id"] = new_cell_id();
        }
        return cell;
    };
    json& cells = nb["cells"];
    cells.insert(
        cells.begin() + static_cast<long>(failed_cell),
        marker(std::string("<span id=\"papermill-error-cell\" ") + error_style +
               ">Execution using papermill encountered an exception here and stopped:</span>"));
    cells.insert(cells.begin(),
                 marker(std::string("<span ") + error_style +
                        ">An Exception was encountered at '<a href=\"#papermill-error-cell\">In [" +
                        count + "]</a>'.</span>"));
}

} // namespace kpool::runner
