// zygote_launcher: the daemon's side of daemon/zygote.py (socket, requests, reports, restarts).
#include "daemon/zygote_launcher.hpp"

#include "daemon/logging.hpp"
#include "daemon/runtime_files.hpp"
#include "protocol/control.hpp"

#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <csignal>

namespace kpool::daemon {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

constexpr auto restart_base = 500ms;
constexpr auto restart_max = 30000ms;
constexpr std::size_t max_line = 1 << 20;

// The arguments after `PYTHON -m ipykernel_launcher`, or nothing if the kernelspec is not an
// ipykernel started that way (then the zygote cannot stand in for it).
std::optional<std::vector<std::string>> ipykernel_args(const std::vector<std::string>& argv) {
    if (argv.size() < 3 || argv[1] != "-m" ||
        (argv[2] != "ipykernel_launcher" && argv[2] != "ipykernel")) {
        return std::nullopt;
    }
    return std::vector<std::string>(argv.begin() + 3, argv.end());
}

} // namespace

struct zygote_launcher::pipe_handle {
    uv_pipe_t pipe; // first: the handle pointer is this object's pointer
    zygote_launcher* owner = nullptr;
};

struct zygote_launcher::child {
    launch_callbacks callbacks;
    std::string log_path;
    std::uint64_t request = 0;
    int pid = 0;
    int pending_signal = 0;
    bool exited = false;
    bool owner_gone = false;
};

namespace {

class forked_process final : public launched_process {
public:
    explicit forked_process(std::shared_ptr<zygote_launcher::child> c) : m_child(std::move(c)) {}
    ~forked_process() override {
        if (m_child->pid != 0 && !m_child->exited) {
            ::kill(-m_child->pid, SIGKILL); // the zygote reaps it and reports; nobody listens
        }
        m_child->owner_gone = true;
    }
    int pid() const override { return m_child->pid; }
    int signal_group(int signum) override {
        if (m_child->exited) {
            return -ESRCH;
        }
        if (m_child->pid == 0) {
            m_child->pending_signal = signum;
            return 0;
        }
        return ::kill(-m_child->pid, signum) == 0 ? 0 : -errno;
    }

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
    logger("kernel")->info("zygote {} starting", m_name);
    auto process = m_fallback.launch(
        m_zygote_spec,
        {nullptr,
         [this](std::string_view out) {
             logger("kernel")->warn("zygote {}: {}", m_name,
                                    protocol::echo_safe(out.substr(0, std::min<std::size_t>(out.size(), 2000))));
         },
         [this](const exit_status& st) { on_zygote_exit(st); }});
    if (!process) {
        on_zygote_exit(exit_status{127, 0});
        return;
    }
    m_zygote = std::move(process).value();
}

void zygote_launcher::on_connection() {
    auto client = uv_ptr<pipe_handle>(new pipe_handle);
    client->owner = this;
    uv_pipe_init(m_loop, &client->pipe, 0);
    client->pipe.data = client.get();
    if (uv_accept(reinterpret_cast<uv_stream_t*>(&m_server->pipe),
                  reinterpret_cast<uv_stream_t*>(&client->pipe)) != 0) {
        return;
    }
    m_client = std::move(client);
    m_read_buffer.clear();
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
    m_read_buffer.append(bytes);
    for (std::size_t eol; (eol = m_read_buffer.find('\n')) != std::string::npos;) {
        const std::string line = m_read_buffer.substr(0, eol);
        m_read_buffer.erase(0, eol + 1);
        json msg = json::parse(line, nullptr, false);
        if (msg.is_object()) {
            on_message(msg);
        } else {
            logger("kernel")->warn("zygote {} sent a line that is not JSON", m_name);
        }
    }
    if (m_read_buffer.size() > max_line) {
        m_read_buffer.clear();
    }
}

void zygote_launcher::on_message(const json& msg) {
    auto log = logger("kernel");
    if (msg.contains("ready")) {
        m_ready = true;
        m_failures = 0;
        const int threads = msg.value("threads", 0);
        log->info("zygote {} ready pid={} threads={}", m_name, msg.value("ready", 0), threads);
        if (threads > 1) {
            log->warn("zygote {}: its imports started {} threads; a fork copies only one, which "
                      "some libraries do not survive",
                      m_name, threads);
        }
    } else if (msg.contains("forked")) {
        auto it = m_by_request.find(msg.value("forked", std::uint64_t{0}));
        if (it == m_by_request.end()) {
            return;
        }
        auto c = it->second;
        m_by_request.erase(it);
        c->pid = msg.value("pid", 0);
        m_by_pid[c->pid] = c;
        if (c->owner_gone) {
            ::kill(-c->pid, SIGKILL);
            return;
        }
        if (c->callbacks.on_started) {
            c->callbacks.on_started(c->pid);
        }
        if (c->pending_signal != 0) {
            ::kill(-c->pid, c->pending_signal);
        }
    } else if (msg.contains("failed")) {
        auto it = m_by_request.find(msg.value("failed", std::uint64_t{0}));
        if (it != m_by_request.end()) {
            auto c = it->second;
            m_by_request.erase(it);
            if (!c->owner_gone && c->callbacks.on_output) {
                c->callbacks.on_output("kpoold: the zygote could not fork: " +
                                       msg.value("error", std::string()) + "\n");
            }
            finish_child(c, exit_status{127, 0});
        }
    } else if (msg.contains("exited")) {
        auto it = m_by_pid.find(msg.value("exited", 0));
        if (it != m_by_pid.end()) {
            auto c = it->second;
            m_by_pid.erase(it);
            finish_child(c, exit_status{msg.value("code", 0), msg.value("signal", 0)});
        }
    }
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
        logger("kernel")->error("exit callback failed: {}", e.what());
    }
}

void zygote_launcher::on_zygote_exit(const exit_status& status) {
    m_ready = false;
    m_client.reset();
    ++m_failures;
    const auto delay = std::min<std::chrono::milliseconds>(
        restart_max, restart_base * (1 << std::min(m_failures - 1, 10)));
    logger("kernel")->error("zygote {} exited ({}); its kernels die with it; restarting in {:.1f} s, "
                            "plain spawning meanwhile",
                            m_name, status.describe(),
                            std::chrono::duration<double>(delay).count());
    // Its children got SIGKILL from their parent-death signal; nobody can report them now.
    auto orphans = std::move(m_by_pid);
    auto unforked = std::move(m_by_request);
    m_by_pid.clear();
    m_by_request.clear();
    for (auto& [pid, c] : orphans) {
        finish_child(c, exit_status{0, SIGKILL});
    }
    for (auto& [request, c] : unforked) {
        finish_child(c, exit_status{127, 0});
    }
    m_restart.start(delay, [this] { start_zygote(); });
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
        return m_fallback.launch(spec, std::move(callbacks));
    }
    auto c = std::make_shared<child>();
    c->callbacks = std::move(callbacks);
    c->request = m_next_request++;
    c->log_path = m_socket_path + "-" + std::to_string(c->request) + ".log";
    json env = json::object();
    for (const std::string& entry : spec.env) {
        const auto eq = entry.find('=');
        if (eq != std::string::npos) {
            env[entry.substr(0, eq)] = entry.substr(eq + 1);
        }
    }
    json limits = json::array();
    for (const resource_limit& l : spec.limits) {
        limits.push_back({l.resource, l.value});
    }
    const json request{{"fork", c->request}, {"args", *args},     {"env", std::move(env)},
                       {"cwd", spec.cwd},     {"log", c->log_path}, {"limits", std::move(limits)}};
    send_line(protocol::dump_json(request) + "\n");
    m_by_request.emplace(c->request, c);
    return std::unique_ptr<launched_process>(new forked_process(std::move(c)));
}

} // namespace kpool::daemon
