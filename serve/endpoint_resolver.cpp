// endpoint_resolver: client::parse_endpoints on libuv's thread pool, its result on the loop.
#include "serve/endpoint_resolver.hpp"

#include "client/daemon_set.hpp"
#include "loop/logging.hpp"

#include <memory>

namespace kpool::serve {

struct endpoint_resolver::job {
    uv_work_t work{};
    endpoint_resolver* owner; // null once the resolver is gone
    std::string setting;
    result<std::vector<std::string>> found = error{errc::internal, "not resolved"};
};

endpoint_resolver::endpoint_resolver(uv_loop_t* loop, std::string setting,
                                     std::chrono::milliseconds every, on_endpoints_fn on_endpoints)
    : m_loop(loop), m_setting(std::move(setting)), m_on_endpoints(std::move(on_endpoints)),
      m_timer(loop) {
    m_timer.start(
        every, [this] { resolve(); }, every);
    m_timer.unref(); // never what keeps the loop running
}

endpoint_resolver::~endpoint_resolver() {
    if (m_running != nullptr) {
        m_running->owner = nullptr;
        uv_cancel(reinterpret_cast<uv_req_t*>(&m_running->work)); // fails harmlessly once started
    }
}

bool endpoint_resolver::needed(const std::string& setting) {
    return setting.find("dns:") != std::string::npos;
}

void endpoint_resolver::resolve() {
    if (m_running != nullptr) {
        return; // the last one is still waiting for DNS
    }
    auto* j = new job{{}, this, m_setting};
    j->work.data = j;
    const int rc = uv_queue_work(
        m_loop, &j->work,
        [](uv_work_t* w) {
            auto* jb = static_cast<job*>(w->data);
            jb->found = client::parse_endpoints(jb->setting);
        },
        [](uv_work_t* w, int status) {
            std::unique_ptr<job> jb(static_cast<job*>(w->data));
            if (jb->owner == nullptr) {
                return;
            }
            endpoint_resolver& self = *jb->owner;
            self.m_running = nullptr;
            if (status != 0) {
                return;
            }
            if (!jb->found) {
                loop::logger("serve")->warn("cannot re-resolve the kpoold endpoints: {}",
                                            jb->found.err().message);
                return;
            }
            self.m_on_endpoints(*jb->found);
        });
    if (rc != 0) {
        delete j;
        return;
    }
    m_running = j;
}

} // namespace kpool::serve
