// decide_gateway: the gateway API's table of routes and the bodies its rows read.
#include "serve/gateway_routes.hpp"

#include "protocol/text.hpp"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cctype>
#include <vector>

namespace kpool::serve {
namespace {

using json = nlohmann::json;

// What a matched row captured: the path's placeholders and the body's fields, before they
// become the row's action.
struct captured {
    std::string kernel_id;  // {id}
    std::string session_id; // {session}
    std::string name;       // {name}; start_kernel: the body's "name"
    std::string resource;   // {file}
    std::map<std::string, std::string> env;
    session_fields session;
};

// Reads a row's body; an answer (400) when the body is wrong.
using body_reader = std::optional<http_response> (*)(std::string_view body, captured& into);

struct gateway_route {
    std::string_view method;
    // Segments joined by '/'; {id} a kernel id, {session} a session id, {name} a kernelspec
    // name, {file} a kernelspec's file: each a plain name (below), else the path is not found.
    std::string_view pattern;
    std::variant<gateway_action, session_action> action;
    std::string_view label; // the metrics label
    bool starts_kernel;     // may start a kernel: 503 while kpool serve is stopping
    std::string_view help;  // kpool serve --help
    body_reader read_body = nullptr;
};

std::optional<http_response> read_start_kernel(std::string_view body, captured& into);
std::optional<http_response> read_new_session(std::string_view body, captured& into);
std::optional<http_response> read_session_change(std::string_view body, captured& into);

using gw = gateway_action;
using se = session_action;
// Metrics labels: one per resource.
constexpr std::string_view kernels_label = "/api/kernels";
constexpr std::string_view sessions_label = "/api/sessions";
constexpr std::string_view specs_label = "/api/kernelspecs";

// clang-format off
constexpr std::array gateway_table{
    gateway_route{"GET",    "api",                       gw::api_info,            "/api",  false, "the server's version"},
    gateway_route{"GET",    "api/kernelspecs",           gw::list_kernelspecs,    specs_label,   false, "the pools, as kernelspecs"},
    gateway_route{"GET",    "api/kernelspecs/{name}",    gw::get_kernelspec,      specs_label,   false, "one pool's kernelspec"},
    gateway_route{"GET",    "kernelspecs/{name}/{file}", gw::kernelspec_resource, specs_label,   false, "a kernelspec's logo or file"},
    gateway_route{"GET",    "api/kernels",               gw::list_kernels,        kernels_label, false, "the kernels held"},
    gateway_route{"POST",   "api/kernels",               gw::start_kernel,        kernels_label, true,  "a warm kernel, held under a new id", read_start_kernel},
    gateway_route{"GET",    "api/kernels/{id}",          gw::get_kernel,          kernels_label, false, "one kernel"},
    gateway_route{"DELETE", "api/kernels/{id}",          gw::delete_kernel,       kernels_label, false, "shut it down"},
    gateway_route{"POST",   "api/kernels/{id}/interrupt", gw::interrupt_kernel,   kernels_label, false, "interrupt it"},
    gateway_route{"POST",   "api/kernels/{id}/restart",  gw::restart_kernel,      kernels_label, true,  "swap in a warm kernel, same id"},
    gateway_route{"GET",    "api/kernels/{id}/channels", gw::channels,  "/api/kernels/channels", true, "its websocket"},
    gateway_route{"GET",    "api/sessions",              se::list,                sessions_label, false, "the sessions"},
    gateway_route{"POST",   "api/sessions",              se::create,              sessions_label, true,  "a kernel for a notebook path", read_new_session},
    gateway_route{"GET",    "api/sessions/{session}",    se::get,                 sessions_label, false, "one session"},
    gateway_route{"PATCH",  "api/sessions/{session}",    se::update,              sessions_label, true,  "rename it or change its kernel", read_session_change},
    gateway_route{"DELETE", "api/sessions/{session}",    se::remove,              sessions_label, false, "end it and its kernel"},
};
// clang-format on

std::vector<std::string_view> segments(std::string_view path) {
    std::vector<std::string_view> out;
    std::size_t at = 0;
    while (at < path.size()) {
        const std::size_t end = std::min(path.find('/', at), path.size());
        if (end > at) {
            out.push_back(path.substr(at, end - at));
        }
        at = end + 1;
    }
    return out;
}

// Kernel and session ids and kernelspec names as jupyter_server's routes accept them.
bool plain_name(std::string_view s) {
    return !s.empty() && s.size() <= 256 && std::all_of(s.begin(), s.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
    }) && s.front() != '.';
}

// Whether `path` matches `pattern`; its placeholders' values go into `into`.
bool matches(std::string_view pattern, const std::vector<std::string_view>& path, captured& into) {
    const auto want = segments(pattern);
    if (want.size() != path.size()) {
        return false;
    }
    for (std::size_t i = 0; i < want.size(); ++i) {
        const std::string_view w = want[i];
        if (!w.starts_with('{')) {
            if (w != path[i]) {
                return false;
            }
            continue;
        }
        if (!plain_name(path[i])) {
            return false;
        }
        std::string value(path[i]);
        if (w == "{id}") {
            into.kernel_id = std::move(value);
        } else if (w == "{session}") {
            into.session_id = std::move(value);
        } else if (w == "{name}") {
            into.name = std::move(value);
        } else {
            into.resource = std::move(value);
        }
    }
    return true;
}

http_response bad_request(const std::string& message) {
    return error_response(400, "bad_request", message);
}

std::optional<http_response> read_start_kernel(std::string_view body, captured& g) {
    if (body.empty()) {
        return std::nullopt;
    }
    const json j = json::parse(body, nullptr, false);
    if (!j.is_object()) {
        return bad_request("the body must be a JSON object");
    }
    for (const auto& [key, value] : j.items()) {
        if (key == "name") {
            if (!value.is_null() && (!value.is_string() || !plain_name(value.get<std::string>()))) {
                return bad_request("'name' must be a kernelspec name");
            }
            g.name = value.is_string() ? value.get<std::string>() : "";
        } else if (key == "env") {
            if (value.is_null()) {
                continue;
            }
            if (!value.is_object()) {
                return bad_request("'env' must be an object of strings");
            }
            for (const auto& [k, v] : value.items()) {
                if (!v.is_string()) {
                    return bad_request("'env' must be an object of strings ('" +
                                       protocol::echo_safe(k) + "' is not)");
                }
                g.env[k] = v.get<std::string>();
            }
        }
        // Other fields (path, type, ...) are jupyter_server's own: ignored, as Kernel Gateway does.
    }
    return std::nullopt;
}

// A string field of a session body, or null (absent); else the 400 it gets.
std::optional<http_response> string_field(const json& j, const char* key,
                                          std::optional<std::string>& into) {
    const auto it = j.find(key);
    if (it == j.end() || it->is_null()) {
        return std::nullopt;
    }
    if (!it->is_string() || it->get_ref<const std::string&>().size() > 4096) {
        return bad_request(std::string("'") + key + "' must be a string");
    }
    into = it->get<std::string>();
    return std::nullopt;
}

// A session body as jupyter_server reads it, with Notebook 4.x's {"notebook": {"path"}} too.
std::optional<http_response> read_session(std::string_view body, session_fields& s) {
    const json j = json::parse(body, nullptr, false);
    if (!j.is_object()) {
        return bad_request("the body must be a JSON object");
    }
    if (auto bad = string_field(j, "path", s.path)) {
        return bad;
    }
    if (const auto nb = j.find("notebook");
        nb != j.end() && nb->is_object() && nb->contains("path")) {
        if (auto bad = string_field(*nb, "path", s.path)) {
            return bad;
        }
        s.type = "notebook";
    }
    if (auto bad = string_field(j, "name", s.name)) {
        return bad;
    }
    if (auto bad = string_field(j, "type", s.type)) {
        return bad;
    }
    if (const auto kernel = j.find("kernel"); kernel != j.end() && !kernel->is_null()) {
        if (!kernel->is_object()) {
            return bad_request("'kernel' must be an object with an 'id' or a 'name'");
        }
        if (auto bad = string_field(*kernel, "id", s.kernel_id)) {
            return bad;
        }
        if (auto bad = string_field(*kernel, "name", s.kernel_name)) {
            return bad;
        }
        if (s.kernel_id && !plain_name(*s.kernel_id)) {
            return bad_request("'kernel.id' must be a kernel id");
        }
        if (s.kernel_name && !plain_name(*s.kernel_name)) {
            return bad_request("'kernel.name' must be a kernelspec name");
        }
    }
    return std::nullopt;
}

std::optional<http_response> read_new_session(std::string_view body, captured& g) {
    if (auto bad = read_session(body, g.session)) {
        return bad;
    }
    if (!g.session.path) {
        return bad_request("a session needs a 'path'");
    }
    return std::nullopt;
}

std::optional<http_response> read_session_change(std::string_view body, captured& g) {
    return read_session(body, g.session);
}

} // namespace

bool is_gateway_path(std::string_view path) {
    return path == "/api" || path.starts_with("/api/") || path.starts_with("/kernelspecs/");
}

std::optional<std::string_view> gateway_route_label(std::string_view path) {
    const auto s = segments(path);
    for (const gateway_route& row : gateway_table) {
        captured ignored;
        if (matches(row.pattern, s, ignored)) {
            return row.label;
        }
    }
    return std::nullopt;
}

std::string gateway_endpoint_help() {
    std::string out;
    for (const gateway_route& row : gateway_table) {
        const std::string method =
            std::string(row.method) + std::string(7 - row.method.size(), ' ');
        out += protocol::help_lines(method + "/" + std::string(row.pattern), row.help, 38);
    }
    return out;
}

std::variant<http_response, do_gateway, do_session, do_preflight>
decide_gateway(std::string_view method, std::string_view path, std::string_view body,
               bool stopping) {
    if (method == "OPTIONS") {
        return do_preflight{};
    }
    const auto s = segments(path);
    std::string allowed; // the methods of the rows whose pattern the path matches
    for (const gateway_route& row : gateway_table) {
        captured c;
        if (!matches(row.pattern, s, c)) {
            continue;
        }
        if (row.method != method) {
            allowed += (allowed.empty() ? "" : ", ") + std::string(row.method);
            continue;
        }
        if (row.read_body) {
            if (auto bad = row.read_body(body, c)) {
                return std::move(*bad);
            }
        }
        if (stopping && row.starts_kernel) {
            return stopping_response();
        }
        if (const auto* a = std::get_if<session_action>(&row.action)) {
            return do_session{*a, std::move(c.session_id), std::move(c.session)};
        }
        return do_gateway{std::get<gateway_action>(row.action), std::move(c.kernel_id),
                          std::move(c.name), std::move(c.resource), std::move(c.env)};
    }
    if (allowed.empty()) {
        return error_response(404, "not_found", "no such resource: " + protocol::echo_safe(path));
    }
    http_response r = error_response(405, "method_not_allowed",
                                     protocol::echo_safe(method) +
                                         " is not allowed here (allowed: " + allowed + ")");
    r.headers.emplace_back("allow", allowed);
    return r;
}

} // namespace kpool::serve
