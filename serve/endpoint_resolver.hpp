// Re-reads an endpoint setting that names `dns:NAME:PORT` (client/daemon_set.hpp) every so
// often, on libuv's thread pool (getaddrinfo blocks), and hands each fresh list to the loop: a
// long-running kpool serve in front of a Kubernetes DaemonSet learns of daemons on new nodes and
// stops sending new requests to daemons whose nodes are gone.
#pragma once

#include "loop/uv_timer.hpp"

#include <uv.h>

#include <chrono>
#include <functional>
#include <string>
#include <vector>

namespace kpool::serve {

class endpoint_resolver {
public:
    using on_endpoints_fn = std::function<void(const std::vector<std::string>& endpoints)>;

    // Resolves `setting` every `every`; `on_endpoints` on the loop with each list that resolved
    // (a failed resolution is logged and changes nothing).
    endpoint_resolver(uv_loop_t* loop, std::string setting, std::chrono::milliseconds every,
                      on_endpoints_fn on_endpoints);
    // A resolution still running finishes on the pool and is then dropped.
    ~endpoint_resolver();
    endpoint_resolver(const endpoint_resolver&) = delete;
    endpoint_resolver& operator=(const endpoint_resolver&) = delete;

    // Whether `setting` names anything to re-resolve (a dns: entry).
    static bool needed(const std::string& setting);

private:
    struct job; // one resolution on the thread pool
    void resolve();

    uv_loop_t* m_loop;
    std::string m_setting;
    on_endpoints_fn m_on_endpoints;
    loop::uv_timer m_timer;
    job* m_running = nullptr; // owned by libuv until its after-work callback
};

} // namespace kpool::serve
