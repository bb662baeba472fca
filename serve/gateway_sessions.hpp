// The Sessions API (jupyter_server's /api/sessions, kept in memory as Kernel Gateway keeps it):
// which notebook (or console, or file) path each of the gateway's kernels serves. JupyterLab's
// SessionManager opens a notebook by POSTing its path; a session whose path exists is returned
// as it is; PATCH renames, moves or changes its kernel (a named kernelspec: a new kernel, the
// old one shut down); DELETE shuts its kernel down. A session whose kernel went away (deleted,
// culled) is dropped the next time anyone looks, as jupyter_server drops it.
#pragma once

#include "serve/gateway_routes.hpp"
#include "serve/http_server.hpp"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kpool::serve {

class gateway;

class gateway_sessions {
public:
    // `root`: kpool serve's notebook folder; a session's kernel starts in its path's folder
    // there when that exists (else in the pool's own directory).
    gateway_sessions(gateway& kernels, std::string root);

    void handle(exchange_ptr exchange, const do_session& action);

private:
    struct session {
        std::string id;
        std::string path;
        std::string name;
        std::string type;
        std::string kernel_id;
    };

    session* find(const std::string& id);
    session* find_path(const std::string& path);
    // {id, path, name, type, kernel, notebook}: jupyter_server's model; none when the kernel
    // is gone (the session is dropped then).
    std::optional<nlohmann::json> model(const std::string& id);
    void create(exchange_ptr exchange, const session_fields& fields);
    void update(exchange_ptr exchange, const std::string& id, const session_fields& fields);
    std::string cwd_for(const std::string& path) const;

    gateway& m_kernels;
    std::string m_root;
    std::vector<session> m_sessions; // in the order they were made, as jupyter_server lists them
};

} // namespace kpool::serve
