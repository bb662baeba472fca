// Plain-text tables: columns padded to their widest cell.
#include "cli/format.hpp"

#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>
#include <vector>

namespace kpool::cli {
namespace {

using json = nlohmann::json;
using row = std::vector<std::string>;

std::string text(const json& j) {
    if (j.is_string()) {
        return j.get<std::string>();
    }
    if (j.is_null()) {
        return "-";
    }
    if (j.is_number_float()) {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.1f", j.get<double>());
        return buf;
    }
    return j.dump();
}

// A number with `digits` decimals ("-" when absent): sub-millisecond latencies stay readable.
std::string fixed(const json& j, int digits) {
    if (!j.is_number()) {
        return "-";
    }
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.*f", digits, j.get<double>());
    return buf;
}

std::string table(const std::vector<row>& rows) {
    std::vector<std::size_t> width;
    for (const row& r : rows) {
        width.resize(std::max(width.size(), r.size()));
        for (std::size_t i = 0; i < r.size(); ++i) {
            width[i] = std::max(width[i], r[i].size());
        }
    }
    std::ostringstream out;
    for (const row& r : rows) {
        std::string line;
        for (std::size_t i = 0; i < r.size(); ++i) {
            line += r[i];
            if (i + 1 < r.size()) {
                line += std::string(width[i] - r[i].size() + 2, ' ');
            }
        }
        out << line << '\n';
    }
    return out.str();
}

std::string pool_state(const json& p) {
    if (p.value("removed", false)) {
        return "removed";
    }
    if (p.value("drained", false)) {
        return "drained";
    }
    return p.value("failing", false) ? "failing" : "ok";
}

// The pool table's columns: the fixed ones, then every counter the daemon reports (status'
// "counters": the daemon's one counter table, so a new counter needs nothing here), then the
// recent medians and the state. Without --wide only those named in `narrow_columns`.
const row pool_fixed_columns = {"POOL", "KERNELSPEC", "LAUNCHER", "SIZE",
                                "WARM", "STARTING",   "LEASED",   "WAITING"};
const row pool_recent_columns = {"ACQUIRE_P50_MS", "ACQUIRE_P99_MS", "TO_WARM_P50_S", "STATE"};
const row narrow_columns = {"HOST",   "POOL",    "KERNELSPEC", "SIZE",           "WARM", "STARTING",
                            "LEASED", "WAITING", "ACQUIRED",   "ACQUIRE_P50_MS", "STATE"};

// The table without the columns `keep` does not name (the header row says which is which).
std::vector<row> only(const std::vector<row>& rows, const row& keep) {
    std::vector<bool> kept;
    for (const std::string& name : rows.front()) {
        kept.push_back(std::find(keep.begin(), keep.end(), name) != keep.end());
    }
    std::vector<row> out;
    for (const row& r : rows) {
        row narrowed;
        for (std::size_t i = 0; i < r.size() && i < kept.size(); ++i) {
            if (kept[i]) {
                narrowed.push_back(r[i]);
            }
        }
        out.push_back(std::move(narrowed));
    }
    return out;
}

// `text` (one detail line: "  preload NAME: ...") broken at spaces into lines of at most
// `width`, the later ones indented under the first's text.
std::string wrapped(const std::string& text, std::size_t width) {
    const std::string indent = "      ";
    std::string out;
    std::string line;
    std::istringstream words(text.substr(2));
    std::string word;
    std::string lead = "  ";
    while (words >> word) {
        if (!line.empty() && lead.size() + line.size() + 1 + word.size() > width) {
            out += lead + line + "\n";
            lead = indent;
            line.clear();
        }
        line += (line.empty() ? "" : " ") + word;
    }
    return out + lead + line + "\n";
}
const row kernel_header = {"KERNEL", "POOL", "PID", "STATE", "AGE_S", "LEASE_LEFT_S"};

// The counter names of a status's first pool that has any (every pool reports the same ones).
std::vector<std::string> counter_names(const json& status) {
    std::vector<std::string> names;
    const auto pools = status.find("pools");
    if (pools == status.end() || !pools->is_array()) {
        return names;
    }
    for (const json& p : *pools) {
        const auto c = p.find("counters");
        if (c != p.end() && c->is_object() && !c->empty()) {
            for (const auto& [name, value] : c->items()) {
                names.push_back(name);
            }
            break;
        }
    }
    return names;
}

std::string upper(std::string s) {
    std::transform(s.begin(), s.end(), s.begin(),
                   [](unsigned char ch) { return std::toupper(ch); });
    return s;
}

row pool_header(const std::vector<std::string>& counters) {
    row header = pool_fixed_columns;
    for (const std::string& c : counters) {
        header.push_back(upper(c));
    }
    header.insert(header.end(), pool_recent_columns.begin(), pool_recent_columns.end());
    return header;
}

row pool_row(const json& p, const std::vector<std::string>& counters) {
    const json& c = p.value("counters", json::object());
    const json& recent = p.value("recent", json::object());
    row r = {text(p["name"]),   text(p["kernelspec"]), text(p.value("launcher", json())),
             text(p["size"]),   text(p["warm"]),       text(p["starting"]),
             text(p["leased"]), text(p["waiting"])};
    for (const std::string& name : counters) {
        r.push_back(text(c.value(name, json())));
    }
    r.insert(r.end(), {fixed(recent.value("acquire_ms_p50", json()), 3),
                       fixed(recent.value("acquire_ms_p99", json()), 3),
                       fixed(recent.value("time_to_warm_s_p50", json()), 2), pool_state(p)});
    return r;
}

row kernel_row(const json& k) {
    return {text(k["id"]),    text(k["pool"]),  text(k["pid"]),
            text(k["state"]), text(k["age_s"]), text(k.value("lease_remaining_s", json()))};
}

std::string summary_line(const json& st) {
    return "kpoold " + text(st.value("version", json())) + "  pid " +
           text(st.value("pid", json())) + "  up " + text(st.value("uptime_s", json())) +
           " s  kernels " + text(st.value("kernels_total", json())) + "/" +
           text(st.value("max_kernels", json())) +
           (st.value("shutting_down", false) ? "  SHUTTING DOWN" : "");
}

// One line of what a fork pool's zygote pre-imports: learned (or listed), candidates, refused.
std::string preload_line(const json& p) {
    const json& pre = p.value("preload", json());
    if (!pre.is_object()) {
        return "";
    }
    const auto names = [](const json& list) {
        std::string out;
        for (const json& n : list) {
            out += (out.empty() ? "" : ", ") + text(n);
        }
        return out.empty() ? std::string("none") : out;
    };
    const std::string mode = text(pre.value("mode", json()));
    if (mode == "off") {
        return text(p["name"]) + ": off";
    }
    const json& zygote = p.value("zygote", json::object());
    std::string line =
        text(p["name"]) + ": " +
        (mode == "learn" ? "learned " + names(pre.value("learned", json::array()))
                         : "listed " + names(pre.value("listed", json::array()))) +
        "; pre-imported " +
        names(zygote.value("preload", json::object()).value("preloaded", json::array()));
    if (const json& c = pre.value("candidates", json::object()); c.is_object() && !c.empty()) {
        std::string cands;
        for (const auto& [name, n] : c.items()) {
            cands += (cands.empty() ? "" : ", ") + name + " (" + text(n) + ")";
        }
        line += "; candidates " + cands + " of the last " + text(pre.value("window", json()));
    }
    if (const json& r = pre.value("refused", json::object()); r.is_object() && !r.empty()) {
        std::string refused;
        for (const auto& [name, why] : r.items()) {
            refused += (refused.empty() ? "" : "; ") + name + ": " + text(why);
        }
        line += "; refused " + refused;
    }
    line += "; zygote +" + fixed(pre.value("growth_mb", json()), 1) + " MB (cap " +
            text(pre.value("max_mb", json())) + ")" +
            (pre.value("rebuilding", false) ? ", rebuilding" : "");
    return line;
}

// One line of which of a fork pool's zygote pages each kernel pre-faults as it starts.
std::string prefault_line(const json& p) {
    const json& zygote = p.value("zygote", json());
    if (!zygote.is_object() || !zygote.value("ready", false)) {
        return "";
    }
    const json& pages = zygote.value("hot_pages", json());
    const json& why_not = zygote.value("hot_pages_why_not", json());
    std::string line = text(p["name"]) + ": ";
    if (!pages.is_number_unsigned() || (pages.get<std::uint64_t>() == 0 && why_not.is_string())) {
        return line + (why_not.is_string() ? "none (" + text(why_not) + ")" : "not learned yet");
    }
    return line + text(pages) + " pages (" + fixed(zygote.value("hot_pages_mib", json()), 1) +
           " MiB) a kernel, from its start and " +
           text(zygote.value("hot_pages_kernels", json(0))) + " sampled kernels' lives";
}

// One line of what a pool's isolation is: none, or the sandbox's namespaces, user and limits.
std::string isolation_line(const json& p) {
    const std::string name = text(p["name"]) + ": ";
    const json& box = p.value("sandbox", json());
    if (!box.is_object()) {
        return p.contains("isolation") ? name + "none (kernels share the host with kpoold)" : "";
    }
    std::string namespaces;
    for (const json& n : box.value("namespaces", json::array())) {
        namespaces += (namespaces.empty() ? "" : ",") + text(n);
    }
    std::string line = name + "sandbox (" + namespaces + " namespaces; uid " +
                       text(box.value("uid", json())) + "; no capabilities; network " +
                       text(box.value("network", json())) + ")";
    if (const json& limits = box.value("limits", json()); limits.is_object()) {
        for (const char* kind : {"memory", "processes"}) {
            const std::string by = limits.value(std::string(kind) + "_by", "");
            if (!by.empty()) {
                line += "; " + std::string(kind) + " " +
                        text(limits.value(std::string(kind) == "memory" ? "memory_mb" : "processes",
                                          json())) +
                        (std::string(kind) == "memory" ? " MiB" : "") + " by " + by;
            }
        }
    }
    if (box.contains("problem")) {
        line += "; CANNOT START: " + text(box["problem"]);
    }
    return line;
}

row with(std::string first, row r) {
    r.insert(r.begin(), std::move(first));
    return r;
}

} // namespace

std::string format_status(const json& st, bool wide) {
    std::ostringstream out;
    out << summary_line(st) << "\n\n";
    const auto counters = counter_names(st);
    std::vector<row> pools = {pool_header(counters)};
    std::vector<std::string> errors;
    std::vector<std::string> launchers;
    std::vector<std::string> refills;
    std::vector<std::string> preloads;
    std::vector<std::string> prefaults;
    std::vector<std::string> isolations;
    for (const json& p : st.value("pools", json::array())) {
        pools.push_back(pool_row(p, counters));
        if (std::string line = isolation_line(p); !line.empty()) {
            isolations.push_back(std::move(line));
        }
        if (std::string line = preload_line(p); !line.empty()) {
            preloads.push_back(std::move(line));
        }
        if (std::string line = prefault_line(p); !line.empty()) {
            prefaults.push_back(std::move(line));
        }
        if (p.contains("last_error") && p["last_error"].is_string()) {
            errors.push_back(text(p["name"]) + ": " + text(p["last_error"]));
        }
        if (p.contains("launcher_why") && p["launcher_why"].is_string()) {
            launchers.push_back(text(p["name"]) + ": " + text(p["launcher"]) + ", " +
                                text(p["launcher_why"]));
        }
        if (p.contains("refill_delay_why") && p["refill_delay_why"].is_string()) {
            refills.push_back(text(p["name"]) + ": " + p.value("refill_delay_s", json()).dump() +
                              " s after an acquire, " + text(p["refill_delay_why"]));
        }
    }
    out << table(wide ? pools : only(pools, narrow_columns));
    const std::pair<const char*, const std::vector<std::string>*> details[] = {
        {"launcher", &launchers}, {"refill", &refills},       {"preload", &preloads},
        {"prefault", &prefaults}, {"isolation", &isolations}, {"last error", &errors}};
    for (const auto& [what, lines] : details) {
        for (const std::string& l : *lines) {
            const std::string line = std::string("  ") + what + " " + l;
            out << (wide ? line + "\n" : wrapped(line, status_width));
        }
    }
    std::vector<row> kernels = {kernel_header};
    for (const json& k : st.value("kernels", json::array())) {
        kernels.push_back(kernel_row(k));
    }
    out << '\n' << table(kernels);
    return out.str();
}

std::string format_statuses(const std::vector<daemon_status>& daemons, bool wide) {
    std::ostringstream out;
    std::vector<std::string> counters;
    for (const daemon_status& d : daemons) {
        if (d.status && counters.empty()) {
            counters = counter_names(*d.status);
        }
    }
    std::vector<row> pools = {with("HOST", pool_header(counters))};
    std::vector<row> kernels = {with("HOST", kernel_header)};
    std::vector<std::string> errors;
    for (const daemon_status& d : daemons) {
        if (!d.status) {
            out << d.endpoint << ": unreachable: " << d.error << '\n';
            continue;
        }
        const json& st = *d.status;
        const std::string host =
            st.value("host", std::string()).empty() ? d.endpoint : st.value("host", std::string());
        out << host << " (" << d.endpoint << "): " << summary_line(st) << '\n';
        for (const json& p : st.value("pools", json::array())) {
            pools.push_back(with(host, pool_row(p, counters)));
            if (p.contains("last_error") && p["last_error"].is_string()) {
                errors.push_back(host + " " + text(p["name"]) + ": " + text(p["last_error"]));
            }
        }
        for (const json& k : st.value("kernels", json::array())) {
            kernels.push_back(with(host, kernel_row(k)));
        }
    }
    out << '\n' << table(wide ? pools : only(pools, narrow_columns));
    for (const auto& e : errors) {
        const std::string line = "  last error " + e;
        out << (wide ? line + "\n" : wrapped(line, status_width));
    }
    out << '\n' << table(kernels);
    return out.str();
}

std::string format_kernelspecs(const json& reply) {
    std::vector<row> rows = {{"NAME", "LANGUAGE", "DISPLAY NAME", "RESOURCE DIR"}};
    for (const json& s : reply.value("kernelspecs", json::array())) {
        rows.push_back({text(s["name"]), text(s["language"]), text(s["display_name"]),
                        text(s["resource_dir"])});
    }
    return table(rows);
}

} // namespace kpool::cli
