// gateway_sessions: the Sessions API's records, answers and kernel changes.
#include "serve/gateway_sessions.hpp"

#include "loop/logging.hpp"
#include "protocol/stamps.hpp"
#include "protocol/text.hpp"
#include "serve/gateway.hpp"
#include "serve/gateway_kernel.hpp"

#include <algorithm>
#include <filesystem>

namespace kpool::serve {

using json = nlohmann::json;
namespace fs = std::filesystem;

namespace {

http_response no_session(const std::string& id) {
    return error_response(404, "not_found", "no session '" + protocol::echo_safe(id) + "'");
}

http_response created(json model) {
    const std::string id = model.value("id", "");
    http_response r = json_response(201, model);
    r.headers.emplace_back("location", "/api/sessions/" + id);
    return r;
}

} // namespace

gateway_sessions::gateway_sessions(gateway& kernels, std::string root)
    : m_kernels(kernels), m_root(std::move(root)) {}

gateway_sessions::session* gateway_sessions::find(const std::string& id) {
    const auto it = std::find_if(m_sessions.begin(), m_sessions.end(),
                                 [&](const session& s) { return s.id == id; });
    return it == m_sessions.end() ? nullptr : &*it;
}

gateway_sessions::session* gateway_sessions::find_path(const std::string& path) {
    const auto it = std::find_if(m_sessions.begin(), m_sessions.end(),
                                 [&](const session& s) { return s.path == path; });
    return it == m_sessions.end() ? nullptr : &*it;
}

std::optional<json> gateway_sessions::model(const std::string& id) {
    session* s = find(id);
    if (!s) {
        return std::nullopt;
    }
    auto kernel = m_kernels.kernel_model(s->kernel_id);
    if (!kernel) {
        std::erase_if(m_sessions, [&](const session& x) { return x.id == id; });
        return std::nullopt;
    }
    json out = {{"id", s->id},
                {"path", s->path},
                {"name", s->name},
                {"type", s->type},
                {"kernel", std::move(*kernel)}};
    if (s->type == "notebook") {
        out["notebook"] = {{"path", s->path},
                           {"name", s->name}}; // the API before sessions had types
    }
    return out;
}

std::string gateway_sessions::cwd_for(const std::string& path) const {
    if (m_root.empty()) {
        return "";
    }
    std::error_code ec;
    const fs::path real =
        fs::weakly_canonical(fs::path(m_root) / fs::path(path).relative_path().parent_path(), ec);
    const fs::path real_root = fs::weakly_canonical(m_root, ec);
    const fs::path rel = real.lexically_relative(real_root);
    if (ec || rel.empty() || *rel.begin() == ".." || !fs::is_directory(real, ec)) {
        return ""; // outside the root, or not there: the pool's own directory
    }
    return real.string();
}

void gateway_sessions::handle(exchange_ptr ex, const do_session& g) {
    // Every action its case, no default: one added to the table without a case fails to build.
    switch (g.action) {
    case session_action::list: {
        json list = json::array();
        std::vector<std::string> ids;
        for (const session& s : m_sessions) {
            ids.push_back(s.id);
        }
        for (const std::string& id : ids) {
            if (auto m = model(id)) {
                list.push_back(std::move(*m));
            }
        }
        return m_kernels.answer(ex, json_response(200, list));
    }
    case session_action::create: return create(std::move(ex), g.fields);
    case session_action::get: {
        auto m = model(g.session_id);
        return m_kernels.answer(ex, m ? json_response(200, *m) : no_session(g.session_id));
    }
    case session_action::update: return update(std::move(ex), g.session_id, g.fields);
    case session_action::remove: {
        session* s = find(g.session_id);
        if (!s) {
            return m_kernels.answer(ex, no_session(g.session_id));
        }
        const std::string kernel_id = s->kernel_id;
        std::erase_if(m_sessions, [&](const session& x) { return x.id == g.session_id; });
        m_kernels.remove(kernel_id);
        return m_kernels.answer(ex, {204, "application/json", "", {}});
    }
    }
}

void gateway_sessions::create(exchange_ptr ex, const session_fields& f) {
    const std::string path = f.path.value_or("");
    if (session* s = find_path(path)) {
        if (auto m = model(s->id)) {
            return m_kernels.answer(ex, created(std::move(*m))); // jupyter_server: the one there is
        }
    }
    session fresh{protocol::random_uuid(), path, f.name.value_or(""), f.type.value_or("notebook"),
                  ""};
    // An existing kernel is used when named; an unknown id starts one, as jupyter_server does.
    if (f.kernel_id && m_kernels.kernel_model(*f.kernel_id)) {
        fresh.kernel_id = *f.kernel_id;
        m_sessions.push_back(fresh);
        return m_kernels.answer(ex, created(*model(fresh.id)));
    }
    m_kernels.launch(
        ex, f.kernel_name.value_or(""), cwd_for(path), {},
        [this, ex, fresh](std::optional<std::string> kernel_id, http_response refusal) mutable {
            if (!kernel_id) {
                return m_kernels.answer(ex, std::move(refusal));
            }
            // Two creates of one path at once: the first to finish is the session.
            if (session* s = find_path(fresh.path)) {
                if (auto m = model(s->id)) {
                    m_kernels.remove(*kernel_id);
                    return m_kernels.answer(ex, created(std::move(*m)));
                }
            }
            fresh.kernel_id = *kernel_id;
            m_sessions.push_back(fresh);
            loop::logger("gateway")->info("session {} for {} on kernel {}", fresh.id,
                                          protocol::echo_safe(fresh.path), fresh.kernel_id);
            m_kernels.answer(ex, created(*model(fresh.id)));
        });
}

void gateway_sessions::update(exchange_ptr ex, const std::string& id, const session_fields& f) {
    if (!model(id)) {
        return m_kernels.answer(ex, no_session(id));
    }
    // The fields other than the kernel, applied once the kernel (if it changes) is there.
    auto apply = [this, id, f](const std::string& kernel_id) -> http_response {
        session* s = find(id);
        if (!s) {
            return no_session(id);
        }
        s->path = f.path.value_or(s->path);
        s->name = f.name.value_or(s->name);
        s->type = f.type.value_or(s->type);
        const std::string before = s->kernel_id;
        s->kernel_id = kernel_id.empty() ? before : kernel_id;
        if (s->kernel_id != before) {
            m_kernels.remove(before); // as jupyter_server: the kernel it leaves is shut down
        }
        auto m = model(id);
        return m ? json_response(200, *m) : no_session(id);
    };
    if (f.kernel_id) { // an id wins over a name
        if (!m_kernels.kernel_model(*f.kernel_id)) {
            return m_kernels.answer(
                ex, error_response(400, "bad_request",
                                   "no kernel '" + protocol::echo_safe(*f.kernel_id) + "'"));
        }
        return m_kernels.answer(ex, apply(*f.kernel_id));
    }
    if (!f.kernel_name) {
        return m_kernels.answer(ex, apply(""));
    }
    const std::string path = f.path.value_or(find(id)->path);
    m_kernels.launch(
        ex, *f.kernel_name, cwd_for(path), {},
        [this, ex, id, apply](std::optional<std::string> kernel_id, http_response refusal) {
            if (!kernel_id) {
                return m_kernels.answer(ex, std::move(refusal));
            }
            if (!find(id)) { // deleted while its new kernel started
                m_kernels.remove(*kernel_id);
                return m_kernels.answer(ex, no_session(id));
            }
            m_kernels.answer(ex, apply(*kernel_id));
        });
}

} // namespace kpool::serve
