// local_kernel: ports, connection file, posix_spawn, readiness, and an orderly end.
#include "runner/local_kernel.hpp"

#include "config/config.hpp"
#include "jupyter/kernelspec.hpp"
#include "protocol/hmac.hpp"
#include "protocol/text.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <thread>
#include <vector>

namespace kpool::runner {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

// A loopback port nobody holds now, as jupyter_client picks them (bind to 0, read, close).
result<std::uint16_t> free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        return error{errc::internal, std::string("socket: ") + std::strerror(errno)};
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    const bool ok = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
                    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0;
    const int e = errno;
    ::close(fd);
    if (!ok) {
        return error{errc::internal, std::string("cannot find a free port: ") + std::strerror(e)};
    }
    return ntohs(addr.sin_port);
}

status write_private(const std::string& path, const std::string& text) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        return error{errc::internal, path + ": " + std::strerror(errno)};
    }
    const bool ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ::close(fd);
    return ok ? ok_status() : status(error{errc::internal, path + ": short write"});
}

} // namespace

result<std::unique_ptr<local_kernel>> local_kernel::start(const request& req) {
    auto spec = jupyter::find_kernelspec(req.kernelspec);
    if (!spec) {
        return spec.err();
    }
    const auto path_var =
        req.env.count("PATH") != 0 ? req.env.at("PATH") : std::string("/usr/bin:/bin");
    auto program = jupyter::resolve_kernel_program(*spec, config::pool_config{}.python, path_var);
    if (!program) {
        return program.err();
    }
    std::unique_ptr<local_kernel> k(new local_kernel());
    k->m_id = "local-" + protocol::random_hex(8);
    k->m_interrupt_mode = spec->interrupt_mode;
    std::string dir = (std::filesystem::temp_directory_path() / "kpool-run-XXXXXX").string();
    if (::mkdtemp(dir.data()) == nullptr) { // 0700
        return error{errc::internal, std::string("mkdtemp: ") + std::strerror(errno)};
    }
    k->m_dir = dir;
    k->m_info.transport = "tcp";
    k->m_info.ip = "127.0.0.1";
    k->m_info.key = protocol::random_hex(32);
    k->m_info.kernel_name = spec->name;
    for (std::uint16_t* port : {&k->m_info.shell_port, &k->m_info.iopub_port, &k->m_info.stdin_port,
                                &k->m_info.control_port, &k->m_info.hb_port}) {
        auto p = free_port();
        if (!p) {
            return p.err();
        }
        *port = *p;
    }
    const std::string connection_file = dir + "/kernel-" + k->m_id + ".json";
    if (auto st = write_private(connection_file, protocol::dump_json(protocol::to_json(k->m_info)));
        !st) {
        return st.err();
    }

    std::vector<std::string> argv = jupyter::format_argv(*spec, connection_file);
    argv.at(0) = *program;
    // As nbclient starts an ipykernel (jupyter_client's KernelManager.ipykernel: these names).
    if (spec->name == "python" || spec->name == "python2" || spec->name == "python3") {
        argv.emplace_back("--HistoryManager.hist_file=:memory:");
    }
    std::map<std::string, std::string> env = req.env;
    for (const auto& [name, value] : spec->env) {
        env[name] = jupyter::expand_env_value(value, req.env);
    }
    env["JPY_PARENT_PID"] = std::to_string(::getpid()); // as jupyter_client sets it
    // debugpy's "frozen modules" warning on every start, unless the caller wants the check.
    env.emplace("PYDEVD_DISABLE_FILE_VALIDATION", "1");
    std::vector<std::string> env_entries;
    for (const auto& [name, value] : env) {
        env_entries.push_back(name + "=" + value);
    }
    std::vector<char*> argv_c;
    for (auto& a : argv) {
        argv_c.push_back(a.data());
    }
    argv_c.push_back(nullptr);
    std::vector<char*> env_c;
    for (auto& e : env_entries) {
        env_c.push_back(e.data());
    }
    env_c.push_back(nullptr);

    posix_spawnattr_t attr;
    posix_spawn_file_actions_t actions;
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_init(&actions);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK |
                                        POSIX_SPAWN_SETSIGDEF);
    posix_spawnattr_setpgroup(&attr, 0); // a group of its own: signals reach what it starts
    sigset_t none;
    sigemptyset(&none);
    posix_spawnattr_setsigmask(&attr, &none);
    sigset_t defaults; // the caller's SIGINT/SIGTERM handlers are not the kernel's
    sigemptyset(&defaults);
    sigaddset(&defaults, SIGINT);
    sigaddset(&defaults, SIGTERM);
    sigaddset(&defaults, SIGPIPE);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    if (!req.cwd.empty()) {
        posix_spawn_file_actions_addchdir_np(&actions, req.cwd.c_str());
    }
    pid_t pid = 0;
    const int rc = ::posix_spawn(&pid, argv_c[0], &actions, &attr, argv_c.data(), env_c.data());
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    if (rc != 0) {
        return error{errc::internal, "cannot start kernelspec '" + spec->name + "' (" + argv[0] +
                                         "): " + std::strerror(rc)};
    }
    k->m_pid = pid;
    k->m_client = std::make_unique<jupyter::kernel_client>(k->m_zmq, k->m_info);
    auto ready = k->m_client->wait_until_ready(req.ready_timeout);
    if (!ready) {
        return error{errc::timeout,
                     "kernelspec '" + spec->name + "' started but " + ready.err().message};
    }
    k->m_kernel_info = std::move(*ready);
    return k;
}

bool local_kernel::alive() {
    if (m_reaped) {
        return false;
    }
    int wstatus = 0;
    if (::waitpid(m_pid, &wstatus, WNOHANG) == m_pid) {
        m_reaped = true;
        return false;
    }
    return true;
}

jupyter::execute_hooks local_kernel::hooks(std::function<bool()> cancelled) {
    jupyter::execute_hooks h;
    h.alive = [this] { return alive(); };
    h.interrupt = [this] {
        if (m_interrupt_mode == "message") {
            m_client->send(jupyter::channel::control, "interrupt_request", json::object());
        } else if (!m_reaped) {
            ::kill(-m_pid, SIGINT);
        }
    };
    h.cancelled = std::move(cancelled);
    return h;
}

void local_kernel::stop() {
    if (m_pid <= 0) {
        return;
    }
    // As jupyter_client's shutdown_kernel: ask, wait a little, then signal the group.
    if (m_client && alive()) {
        m_client->send(jupyter::channel::control, "shutdown_request", {{"restart", false}});
    }
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (alive() && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(20ms);
    }
    for (int sig : {SIGTERM, SIGKILL}) {
        if (!alive()) {
            break;
        }
        ::kill(-m_pid, sig);
        const auto until = std::chrono::steady_clock::now() + 2s;
        while (alive() && std::chrono::steady_clock::now() < until) {
            std::this_thread::sleep_for(20ms);
        }
    }
    if (!m_reaped) {
        ::waitpid(m_pid, nullptr, 0);
        m_reaped = true;
    }
    ::kill(-m_pid, SIGKILL); // whatever the kernel left in its group
}

local_kernel::~local_kernel() {
    stop();
    m_client.reset();
    if (!m_dir.empty()) {
        std::error_code ec;
        std::filesystem::remove_all(m_dir, ec);
    }
}

} // namespace kpool::runner
