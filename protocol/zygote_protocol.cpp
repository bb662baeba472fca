// zygote_protocol: fork requests to JSON lines, the zygote's JSON lines to typed messages.
#include "protocol/zygote_protocol.hpp"

#include "protocol/text.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>

namespace kpool::protocol::zygote {
namespace {

using json = nlohmann::json;

error bad(std::string what) {
    return error{errc::bad_request, "zygote message: " + std::move(what)};
}

json plan_json(const preload_plan& plan) {
    return {{"modules", plan.modules},
            {"max_mb", plan.max_mb},
            {"request_env", plan.request_env},
            {"prefault", plan.prefault},
            {"imports_every_s", plan.imports_every_s}};
}

// A field that must be there with the right type: unsigned, int, string or bool.
template <class T>
bool read(const json& j, const char* key, T& out) {
    auto it = j.find(key);
    if (it == j.end()) {
        return false;
    }
    if constexpr (std::is_same_v<T, std::string>) {
        if (!it->is_string())
            return false;
    } else if constexpr (std::is_same_v<T, bool>) {
        if (!it->is_boolean())
            return false;
    } else if constexpr (std::is_unsigned_v<T>) {
        if (!it->is_number_unsigned())
            return false;
    } else {
        if (!it->is_number_integer())
            return false;
    }
    out = it->get<T>();
    return true;
}

// An optional text: absent or null is empty.
bool read_text(const json& j, const char* key, std::string& out) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
        out.clear();
        return true;
    }
    return read(j, key, out);
}

// An optional list (absent or null: empty): `each` reads an item, false when it is malformed.
template <class F>
bool read_list(const json& j, const char* key, F each) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
        return true;
    }
    return it->is_array() && std::all_of(it->begin(), it->end(), each);
}

// A list of module names (dotted or not, at most 200 characters).
bool read_names(const json& j, const char* key, std::vector<std::string>& out) {
    return read_list(j, key, [&](const json& v) {
        if (!v.is_string() || v.get_ref<const std::string&>().empty() ||
            v.get_ref<const std::string&>().size() > 200) {
            return false;
        }
        out.push_back(v.get<std::string>());
        return true;
    });
}

// A list of [name, text] pairs.
bool read_pairs(const json& j, const char* key,
                std::vector<std::pair<std::string, std::string>>& out) {
    return read_list(j, key, [&](const json& v) {
        if (!v.is_array() || v.size() != 2 || !v[0].is_string() || !v[1].is_string()) {
            return false;
        }
        out.emplace_back(v[0].get<std::string>(), v[1].get<std::string>());
        return true;
    });
}

bool read_number(const json& j, const char* key, double& out) {
    auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
        return true;
    }
    if (!it->is_number()) {
        return false;
    }
    out = it->get<double>();
    return true;
}

bool read_preload(const json& j, preload_report& out) {
    if (!j.is_object()) {
        return j.is_null();
    }
    const bool modules = read_list(j, "preloaded", [&](const json& m) {
        preloaded_module pm;
        if (!m.is_object() || !read(m, "name", pm.name) || !read_text(m, "file", pm.file) ||
            !read_number(m, "mtime", pm.mtime)) {
            return false;
        }
        out.preloaded.push_back(std::move(pm));
        return true;
    });
    return modules && read_pairs(j, "refused", out.refused) &&
           read_names(j, "warmed", out.warmed) &&
           read_pairs(j, "warm_ups_refused", out.warm_ups_refused) &&
           read_number(j, "growth_mb", out.growth_mb) && read_number(j, "rss_mb", out.rss_mb);
}

} // namespace

std::string format(const fork_request& r) {
    json env = json::object();
    for (const auto& [name, value] : r.env) {
        env[name] = value;
    }
    json limits = json::array();
    for (const auto& [resource, value] : r.limits) {
        limits.push_back({resource, value});
    }
    json j{{"fork", r.id},     {"args", r.args}, {"connection_file", r.connection_file},
           {"env", env},       {"cwd", r.cwd},   {"log", r.log},
           {"limits", limits}, {"idle", r.idle}};
    if (r.sandbox) {
        j["sandbox"] = json::parse(format(*r.sandbox));
        j["sandbox_helper"] = r.sandbox_helper;
    }
    return dump_json(j) + "\n";
}

std::string format(const preload_plan& plan) { return dump_json(plan_json(plan)); }

std::string format(const settings& s) {
    json helpers = json::object();
    for (const auto& [name, source] : s.helpers) {
        helpers[name] = source;
    }
    return dump_json(json{{"pool", s.pool},
                          {"socket", s.socket},
                          {"startup_code", s.startup_code},
                          {"args", s.args ? json(*s.args) : json(nullptr)},
                          {"prime", s.prime},
                          {"preload", plan_json(s.preload)},
                          {"helpers", std::move(helpers)}});
}

result<message> parse(std::string_view line) {
    const json j = json::parse(line, nullptr, false);
    if (!j.is_object()) {
        return bad("not a JSON object");
    }
    if (j.contains("ready")) {
        ready m;
        if (!read(j, "ready", m.pid) || !read(j, "threads", m.threads)) {
            return bad("'ready' needs pid and threads");
        }
        if (j.contains("prebuilt") &&
            (!read(j, "prebuilt", m.prebuilt) || !read_text(j, "why_not", m.why_not))) {
            return bad("'ready' has a malformed prebuilt or why_not");
        }
        if (j.contains("preload") && !read_preload(j["preload"], m.preload)) {
            return bad("'ready' has a malformed preload report");
        }
        return message{m};
    }
    if (j.contains("forked")) {
        forked m;
        if (!read(j, "forked", m.request) || !read(j, "pid", m.pid) || m.pid <= 0) {
            return bad("'forked' needs a request id and a pid");
        }
        if (j.contains("prebuilt") &&
            (!read(j, "prebuilt", m.prebuilt) || !read_text(j, "why_not", m.why_not))) {
            return bad("'forked' has a malformed prebuilt or why_not");
        }
        if (j.contains("at_idle") && !read(j, "at_idle", m.at_idle)) {
            return bad("'forked' has a malformed at_idle");
        }
        return message{m};
    }
    if (j.contains("failed")) {
        fork_failed m;
        if (!read(j, "failed", m.request) || !read_text(j, "error", m.error)) {
            return bad("'failed' needs a request id");
        }
        return message{m};
    }
    if (j.contains("exited")) {
        exited m;
        if (!read(j, "exited", m.pid) || !read(j, "code", m.code) ||
            !read(j, "signal", m.term_signal)) {
            return bad("'exited' needs pid, code and signal");
        }
        return message{m};
    }
    if (j.contains("learned")) {
        learned m;
        if (!read(j, "learned", m.pages) || !read_text(j, "why_not", m.why_not) ||
            (j.contains("kernels") && !read(j, "kernels", m.kernels))) {
            return bad("'learned' needs a page count");
        }
        return message{m};
    }
    if (j.contains("imports")) {
        imports m;
        if (!read(j, "imports", m.pid) || !read_names(j, "modules", m.modules) ||
            !read_pairs(j, "other", m.other) ||
            (j.contains("running") && !read(j, "running", m.running))) {
            return bad("'imports' needs a pid, modules and other");
        }
        return message{m};
    }
    if (j.contains("error")) {
        complaint m;
        if (!read_text(j, "error", m.error)) {
            return bad("'error' needs a text");
        }
        return message{m};
    }
    return bad("no known key");
}

std::vector<std::string> line_splitter::feed(std::string_view bytes) {
    std::vector<std::string> lines;
    while (!bytes.empty()) {
        const auto eol = bytes.find('\n');
        const std::string_view piece = bytes.substr(0, eol);
        if (!m_skipping) {
            if (m_partial.size() + piece.size() > m_max) {
                m_partial.clear();
                m_skipping = true;
                ++m_dropped;
            } else {
                m_partial.append(piece);
            }
        }
        if (eol == std::string_view::npos) {
            break;
        }
        if (!m_skipping) {
            lines.push_back(std::move(m_partial));
        }
        m_partial.clear();
        m_skipping = false;
        bytes.remove_prefix(eol + 1);
    }
    return lines;
}

} // namespace kpool::protocol::zygote
