// zygote_launcher: the daemon's side of daemon/process/zygote.py (socket, requests, reports,
// restarts).
#include "daemon/process/zygote_launcher.hpp"

#include "daemon/core/backoff.hpp"
#include "daemon/process/cpu_priority.hpp"
#include "daemon/process/runtime_files.hpp"
#include "loop/logging.hpp"
#include "protocol/control.hpp"
#include "protocol/text.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <csignal>

namespace kpool::daemon {
namespace {

using json = nlohmann::json;
namespace zp = protocol::zygote;

json pairs_object(const std::vector<std::pair<std::string, std::string>>& pairs) {
    json out = json::object();
    for (const auto& [name, why] : pairs) {
        out[name] = why;
    }
    return out;
}

json describe_preload(const zp::preload_report& r) {
    json modules = json::array();
    for (const auto& m : r.preloaded) {
        modules.push_back(m.name);
    }
    return {{"preloaded", modules},     {"refused", pairs_object(r.refused)},
            {"warmed", r.warmed},       {"warm_ups_refused", pairs_object(r.warm_ups_refused)},
            {"growth_mb", r.growth_mb}, {"rss_mb", r.rss_mb}};
}

} // namespace

std::optional<std::vector<std::string>> ipykernel_args(const std::vector<std::string>& argv) {
    if (argv.size() < 3 || argv[1] != "-m" ||
        (argv[2] != "ipykernel_launcher" && argv[2] != "ipykernel")) {
        return std::nullopt;
    }
    return std::vector<std::string>(argv.begin() + 3, argv.end());
}

struct zygote_launcher::pipe_handle {
    uv_pipe_t pipe; // first: the handle pointer is this object's pointer
    zygote_launcher* owner = nullptr;
};

struct zygote_launcher::child : process_record {
    launch_callbacks callbacks;
    std::string log_path;
    std::uint64_t request = 0;
    int zygote_pid = 0; // the zygote that forks it
    bool prebuilt =
        false; // around the zygote's pre-built shell (which answers kpool_context_request)
};

namespace {

class forked_process final : public launched_process {
public:
    explicit forked_process(std::shared_ptr<zygote_launcher::child> c) : m_child(std::move(c)) {}
    ~forked_process() override { m_child->drop(); } // the zygote reaps it; nobody listens
    int pid() const override { return m_child->pid; }
    int signal_group(int signum) override { return m_child->signal_group(signum); }
    // Before the pid is known the zygote may be forking it at SCHED_IDLE.
    void hurry() override {
        if (m_child->pid == 0 && !m_child->exited && m_child->zygote_pid > 0) {
            cpu_priority::make_normal(m_child->zygote_pid);
        }
    }
    bool applies_context_message() const override { return m_child->prebuilt; }

private:
    std::shared_ptr<zygote_launcher::child> m_child;
};

} // namespace

zygote_launcher::zygote_launcher(uv_loop_t* loop, launcher& fallback, launch_spec zygote,
                                 std::string socket_path, std::string name)
    : m_loop(loop), m_fallback(fallback), m_zygote_spec(std::move(zygote)),
      m_socket_path(std::move(socket_path)), m_name(std::move(name)), m_restart(loop) {
    m_server.reset(new pipe_handle);
    m_server->owner = this;
    uv_pipe_init(loop, &m_server->pipe, 0);
    m_server->pipe.data = m_server.get();
    ::unlink(m_socket_path.c_str());
    int rc = uv_pipe_bind(&m_server->pipe, m_socket_path.c_str());
    if (rc == 0) {
        rc = uv_listen(reinterpret_cast<uv_stream_t*>(&m_server->pipe), 1,
                       [](uv_stream_t* server, int status) {
                           if (status == 0) {
                               static_cast<pipe_handle*>(server->data)->owner->on_connection();
                           }
                       });
    }
    if (rc != 0) {
        throw std::runtime_error("cannot listen on " + m_socket_path + ": " + uv_strerror(rc));
    }
    start_zygote();
}

zygote_launcher::~zygote_launcher() {
    m_client.reset();
    m_server.reset();
    m_zygote.reset(); // killed; its kernels die with it (parent-death signal)
    ::unlink(m_socket_path.c_str());
    for (auto& [pid, c] : m_by_pid) {
        c->exited = true;
    }
}

void zygote_launcher::start_zygote() {
    loop::logger("kernel")->info("zygote {} starting", m_name);
    auto process = m_fallback.launch(
        m_zygote_spec,
        {nullptr,
         [this](std::string_view out) {
             loop::logger("kernel")->warn(
                 "zygote {}: {}", m_name,
                 protocol::echo_safe(out.substr(0, std::min<std::size_t>(out.size(), 2000))));
         },
         [this](const exit_status& st) { on_zygote_exit(st); }});
    if (!process) {
        on_zygote_exit(exit_status{127, 0, {}});
        return;
    }
    m_zygote = std::move(process).value();
}

void zygote_launcher::on_connection() {
    auto client = loop::uv_ptr<pipe_handle>(new pipe_handle);
    client->owner = this;
    uv_pipe_init(m_loop, &client->pipe, 0);
    client->pipe.data = client.get();
    if (uv_accept(reinterpret_cast<uv_stream_t*>(&m_server->pipe),
                  reinterpret_cast<uv_stream_t*>(&client->pipe)) != 0) {
        return;
    }
    m_client = std::move(client);
    m_lines.reset();
    uv_read_start(
        reinterpret_cast<uv_stream_t*>(&m_client->pipe),
        [](uv_handle_t*, size_t, uv_buf_t* buf) {
            static char buffer[65536]; // the loop is single-threaded; each read is used at once
            *buf = uv_buf_init(buffer, sizeof buffer);
        },
        [](uv_stream_t* stream, ssize_t n, const uv_buf_t* buf) {
            auto* self = static_cast<pipe_handle*>(stream->data)->owner;
            if (n > 0) {
                self->on_read(std::string_view(buf->base, static_cast<std::size_t>(n)));
            } else if (n < 0) {
                uv_read_stop(stream); // the zygote is going; its exit is handled on its own
            }
        });
}

void zygote_launcher::on_read(std::string_view bytes) {
    for (const std::string& line : m_lines.feed(bytes)) {
        auto msg = zp::parse(line);
        if (msg) {
            on_message(*msg);
        } else {
            loop::logger("kernel")->warn("zygote {}: {}: {}", m_name, msg.err().message,
                                         protocol::echo_safe(line.substr(0, 200)));
        }
    }
}

void zygote_launcher::on_message(const zp::message& msg) {
    std::visit(
        [this](const auto& m) {
            using T = std::decay_t<decltype(m)>;
            if constexpr (std::is_same_v<T, zp::ready>) {
                on_ready(m);
            } else if constexpr (std::is_same_v<T, zp::forked>) {
                on_forked(m);
            } else if constexpr (std::is_same_v<T, zp::fork_failed>) {
                on_fork_failed(m);
            } else if constexpr (std::is_same_v<T, zp::exited>) {
                on_exited(m);
            } else if constexpr (std::is_same_v<T, zp::learned>) {
                on_learned(m);
            } else if constexpr (std::is_same_v<T, zp::imports>) {
                on_imports(m);
            } else {
                loop::logger("kernel")->error("zygote {} could not read a request: {}", m_name,
                                              protocol::echo_safe(m.error));
            }
        },
        msg);
}

void zygote_launcher::on_ready(const zp::ready& m) {
    auto log = loop::logger("kernel");
    m_ready = true;
    m_failures = 0;
    m_stats.pid = m.pid;
    m_stats.prebuilt = m.prebuilt;
    m_stats.why_not = m.why_not;
    m_stats.hot_pages.reset();
    m_stats.hot_pages_why_not.clear();
    m_stats.hot_pages_kernels = 0;
    log->info("zygote {} ready pid={} threads={} prebuilt={}{}", m_name, m.pid, m.threads,
              m.prebuilt, m.prebuilt ? "" : " (" + m.why_not + ")");
    if (m.threads > 1) {
        log->warn("zygote {}: its imports started {} threads; a fork copies only one, which "
                  "some libraries do not survive",
                  m_name, m.threads);
    }
    m_preload = m.preload;
    if (!m.preload.preloaded.empty() || !m.preload.refused.empty()) {
        std::string names;
        for (const auto& p : m.preload.preloaded) {
            names += (names.empty() ? "" : ", ") + p.name;
        }
        log->info("zygote {} pre-imported {} module(s) ({}), refused {}, warmed {}, grew {:.1f} MB",
                  m_name, m.preload.preloaded.size(), names.empty() ? "none" : names,
                  m.preload.refused.size(), m.preload.warmed.size(), m.preload.growth_mb);
        for (const auto& [name, why] : m.preload.refused) {
            log->info("zygote {}: not pre-importing {}: {}", m_name, protocol::echo_safe(name),
                      protocol::echo_safe(why));
        }
    }
    if (m_events.on_ready) {
        m_events.on_ready(m); // may retire or destroy this launcher (deferred by its owner)
    }
}

void zygote_launcher::on_imports(const zp::imports& m) {
    if (m_events.on_imports) {
        m_events.on_imports(m);
    }
}

void zygote_launcher::on_forked(const zp::forked& m) {
    auto it = m_by_request.find(m.request);
    if (it == m_by_request.end()) {
        return;
    }
    auto c = it->second;
    m_by_request.erase(it);
    m_by_pid[m.pid] = c;
    if (m.at_idle) {
        ++m_stats.forked_at_idle;
    }
    c->prebuilt = m.prebuilt;
    if (m.prebuilt) {
        ++m_stats.kernels_prebuilt;
    } else {
        ++m_stats.kernels_not_prebuilt;
        ++m_stats.not_prebuilt_because[m.why_not];
    }
    if (!c->owner_gone && c->callbacks.on_started) {
        c->pid = m.pid; // before the callback, which may signal it
        c->callbacks.on_started(m.pid);
    }
    c->started(m.pid);
}

void zygote_launcher::on_fork_failed(const zp::fork_failed& m) {
    auto it = m_by_request.find(m.request);
    if (it == m_by_request.end()) {
        return;
    }
    auto c = it->second;
    m_by_request.erase(it);
    if (!c->owner_gone && c->callbacks.on_output) {
        c->callbacks.on_output("kpoold: the zygote could not fork: " + m.error + "\n");
    }
    finish_child(c, exit_status{127, 0, {}});
}

void zygote_launcher::on_exited(const zp::exited& m) {
    auto it = m_by_pid.find(m.pid);
    if (it != m_by_pid.end()) {
        auto c = it->second;
        m_by_pid.erase(it);
        finish_child(c, exit_status{m.code, m.term_signal, {}});
    }
}

void zygote_launcher::on_learned(const zp::learned& m) {
    m_stats.hot_pages = m.pages;
    m_stats.hot_pages_why_not = m.why_not;
    m_stats.hot_pages_kernels = m.kernels;
    loop::logger("kernel")->debug(
        "zygote {}: {} hot pages to pre-fault in each kernel, from {} kernels' lives{}", m_name,
        m.pages, m.kernels, m.why_not.empty() ? "" : " (" + m.why_not + ")");
}

nlohmann::json zygote_launcher::describe() const {
    json because = json::object();
    for (const auto& [reason, n] : m_stats.not_prebuilt_because) {
        because[reason] = n;
    }
    return json{
        {"ready", m_ready},
        {"pid", m_ready ? json(m_stats.pid) : json(nullptr)},
        {"prebuilt", m_ready && m_stats.prebuilt},
        {"why_not", m_stats.why_not.empty() ? json(nullptr) : json(m_stats.why_not)},
        {"kernels_prebuilt", m_stats.kernels_prebuilt},
        {"kernels_not_prebuilt", m_stats.kernels_not_prebuilt},
        {"not_prebuilt_because", std::move(because)},
        {"kernels_spawned_meanwhile", m_stats.launched_by_fallback},
        {"forked_at_idle", m_stats.forked_at_idle},
        {"hot_pages", m_stats.hot_pages ? json(*m_stats.hot_pages) : json(nullptr)},
        {"hot_pages_why_not",
         m_stats.hot_pages_why_not.empty() ? json(nullptr) : json(m_stats.hot_pages_why_not)},
        {"hot_pages_mib",
         m_stats.hot_pages
             ? json(std::round(static_cast<double>(*m_stats.hot_pages) *
                               static_cast<double>(::sysconf(_SC_PAGESIZE)) / (1 << 20) * 10) /
                    10)
             : json(nullptr)},
        {"hot_pages_kernels", m_stats.hot_pages_kernels},
        {"preload", describe_preload(m_preload)}};
}

void zygote_launcher::finish_child(const std::shared_ptr<child>& c, exit_status status) {
    c->exited = true;
    auto tail = read_small_file(c->log_path, 1 << 20);
    ::unlink(c->log_path.c_str());
    if (c->owner_gone) {
        return;
    }
    try {
        if (tail && !tail->empty() && c->callbacks.on_output) {
            c->callbacks.on_output(*tail);
        }
        if (c->callbacks.on_exit) {
            c->callbacks.on_exit(status); // may destroy the owner
        }
    } catch (const std::exception& e) {
        loop::logger("kernel")->error("exit callback failed: {}", e.what());
    }
}

void zygote_launcher::on_zygote_exit(const exit_status& status) {
    m_ready = false;
    m_client.reset();
    m_lines.reset();
    ++m_failures;
    const auto delay = backoff_delay(m_failures);
    loop::logger("kernel")->error(
        "zygote {} exited ({}); its kernels die with it; restarting in {:.1f} s, "
        "plain spawning meanwhile",
        m_name, status.describe(), std::chrono::duration<double>(delay).count());
    // Its children got SIGKILL from their parent-death signal; nobody can report them now.
    auto orphans = std::move(m_by_pid);
    auto unforked = std::move(m_by_request);
    m_by_pid.clear();
    m_by_request.clear();
    for (auto& [pid, c] : orphans) {
        finish_child(c, exit_status{0, SIGKILL, {}});
    }
    for (auto& [request, c] : unforked) {
        finish_child(c, exit_status{127, 0, {}});
    }
    m_restart.start(delay, [this] { start_zygote(); });
    if (m_events.on_exit) {
        m_events.on_exit(status); // its owner may drop this launcher (deferred)
    }
    m_zygote.reset(); // last: we are inside its exit callback, which allows this
}

void zygote_launcher::send_line(const std::string& line) {
    struct write_request {
        uv_write_t req;
        std::string data;
    };
    auto* w = new write_request{{}, line};
    uv_buf_t buf = uv_buf_init(w->data.data(), static_cast<unsigned>(w->data.size()));
    if (uv_write(&w->req, reinterpret_cast<uv_stream_t*>(&m_client->pipe), &buf, 1,
                 [](uv_write_t* req, int) { delete reinterpret_cast<write_request*>(req); }) != 0) {
        delete w;
    }
}

result<std::unique_ptr<launched_process>> zygote_launcher::launch(const launch_spec& spec,
                                                                  launch_callbacks callbacks) {
    auto args = ipykernel_args(spec.argv);
    if (!m_ready || !m_client || !args) {
        if (args) {
            ++m_stats.launched_by_fallback;
        }
        return m_fallback.launch(spec, std::move(callbacks));
    }
    auto c = std::make_shared<child>();
    c->callbacks = std::move(callbacks);
    c->request = m_next_request++;
    c->zygote_pid = m_zygote ? m_zygote->pid() : 0;
    c->log_path = m_socket_path + "-" + std::to_string(c->request) + ".log";
    zp::fork_request request{.id = c->request,
                             .args = std::move(*args),
                             .connection_file = spec.connection_file,
                             .env = {},
                             .cwd = spec.cwd,
                             .log = c->log_path,
                             .limits = {},
                             .idle = spec.idle,
                             .sandbox = spec.sandbox,
                             .sandbox_helper = spec.sandbox_helper};
    for (const std::string& entry : spec.env) {
        const auto eq = entry.find('=');
        if (eq != std::string::npos) {
            request.env.emplace_back(entry.substr(0, eq), entry.substr(eq + 1));
        }
    }
    for (const resource_limit& l : spec.limits) {
        request.limits.emplace_back(l.resource, l.value);
    }
    send_line(zp::format(request));
    m_by_request.emplace(c->request, c);
    return std::unique_ptr<launched_process>(new forked_process(std::move(c)));
}

} // namespace kpool::daemon
