// One kernel's life as an OS process: launch, prove readiness over the wire protocol, shut down.
//
//   launching --(kernel wrote its ports)--> probing --(signed kernel_info_reply)-->
//   [preheating: the pool's startup_code runs, silently] --> ready
//   any phase --stop()--> stopping: shutdown_request on control, SIGTERM, SIGKILL to the group
//   any phase --process exits--> exited: files removed, events.kernel_exited()
//
// With tcp the kernel binds its own random ports (the connection file we write has ports 0 and
// ipykernel fills them in), so there is no bind-then-close race between choosing a port and the
// kernel binding it. With ipc the ports are socket file suffixes under a per-kernel prefix, so
// we assign them and nothing can collide.
#pragma once

#include "daemon/kernelspec.hpp"
#include "daemon/launcher.hpp"
#include "daemon/uv_timer.hpp"
#include "daemon/zmq_watcher.hpp"
#include "protocol/connection_info.hpp"
#include "protocol/wire.hpp"

#include <zmq.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <set>
#include <string>

namespace kpool::daemon {

// What kernel_process reports; the daemon forwards these to the kernel's pool.
class kernel_events {
public:
    virtual ~kernel_events() = default;
    // The process exists (launching finishes after start() returns).
    virtual void kernel_spawned(const std::string& id, int pid) = 0;
    virtual void kernel_warm(const std::string& id) = 0;
    // Start failed (timeout, bad connection file). The kernel is being stopped; kernel_exited
    // follows.
    virtual void kernel_start_failed(const std::string& id, const std::string& reason) = 0;
    // A ready kernel missed a heartbeat (watch(true)). It keeps running until stopped.
    virtual void kernel_unresponsive(const std::string& id, const std::string& reason) = 0;
    // The process is gone and its files removed. `output_tail` is its last stdout/stderr bytes.
    virtual void kernel_exited(const std::string& id, const exit_status& status,
                               const std::string& output_tail) = 0;
};

// The environment a kernel of `spec` starts with: the daemon's, the kernelspec's env on top,
// JPY_PARENT_PID and KPOOL_INSTANCE=`instance`, as "NAME=value" entries.
std::vector<std::string> kernel_environment(const kernelspec& spec, const std::string& instance);

struct kernel_setup {
    std::string id;
    std::string pool;
    kernelspec spec;
    std::string kernels_dir; // 0700 directory for the connection file and ipc sockets
    std::string instance;    // this daemon run's id, given to the kernel as KPOOL_INSTANCE
    std::string ipc_name;    // ipc: short and unique within kernels_dir (socket paths are short)
    std::string transport;   // "tcp" or "ipc"
    std::string ip;
    std::chrono::milliseconds ready_timeout{60000};
    std::chrono::milliseconds shutdown_grace{2000};
    std::vector<resource_limit> limits;
    std::chrono::milliseconds heartbeat_interval{0}; // 0: no heartbeat
    std::chrono::milliseconds heartbeat_timeout{5000};
    // Run before the kernel counts as warm (imports, say); an error fails the start.
    std::string startup_code;
};

class kernel_process {
public:
    kernel_process(uv_loop_t* loop, zmq::context_t& zmq, launcher& launcher, kernel_setup setup,
                   kernel_events& events);
    ~kernel_process();
    kernel_process(const kernel_process&) = delete;
    kernel_process& operator=(const kernel_process&) = delete;

    // Writes the connection file and launches the process. An error means nothing is running.
    status start();

    // Begins the graceful shutdown sequence; idempotent. kernel_exited follows.
    void stop();

    // While on (and the kernel ready), sends a kernel_info_request every heartbeat_interval and
    // reports kernel_unresponsive when one is not answered within heartbeat_timeout. Only for
    // idle warm kernels: a kernel a client holds may be busy for hours, and is not ours to poke.
    void watch(bool on);

    // Signal to the kernel's process group; 0 or -errno.
    int signal(int signum);

    // Executes `code` silently (no history, no execution count) in a ready kernel and calls
    // `done` once with the outcome: an error if it raised, timed out, or the kernel went away.
    // One at a time. `done` may destroy nothing but may stop this kernel.
    using code_done = std::function<void(const status&)>;
    void run_code(const std::string& code, std::chrono::milliseconds timeout, code_done done);

    const kernelspec& spec() const { return m_setup.spec; }

    const std::string& id() const { return m_setup.id; }
    int pid() const { return m_process ? m_process->pid() : 0; }
    bool exited() const { return m_phase == phase::exited; }
    const protocol::connection_info& connection() const { return m_info; }
    const std::string& connection_file() const { return m_connection_file; }
    std::chrono::steady_clock::time_point started_at() const { return m_started_at; }

private:
    enum class phase { created, launching, probing, preheating, ready, stopping, exited };

    void on_started(int pid);
    void check_connection_file();
    void begin_probe();
    void send_kernel_info_request();
    void send_heartbeat();
    void open_shell();
    void close_shell();
    void on_shell_message();
    void on_execute_reply(const protocol::wire_message& msg);
    void finish_code(const status& outcome);
    void run_startup_code();
    // Sends code to run silently on the shell channel; returns the request's msg_id.
    std::string send_silent_execute(const std::string& code);
    void on_startup_reply(const protocol::wire_message& msg);
    void become_ready();
    void fail_start(const std::string& reason);
    void send_shutdown_request();
    void on_exit(const exit_status& status);
    void append_output(std::string_view bytes);
    launch_spec make_launch_spec() const;

    uv_loop_t* m_loop;
    zmq::context_t& m_zmq;
    launcher& m_launcher;
    kernel_setup m_setup;
    kernel_events& m_events;

    phase m_phase = phase::created;
    protocol::connection_info m_info;
    std::string m_connection_file;
    std::string m_session; // our wire-protocol session id with this kernel
    std::set<std::string> m_probe_ids;
    std::string m_output_tail;
    std::string m_code_msg_id; // the execute_request run_code is waiting on
    std::string m_heartbeat_id; // the kernel_info_request of the beat in flight
    std::string m_startup_msg_id; // the execute_request of startup_code
    code_done m_code_done;
    std::chrono::steady_clock::time_point m_started_at;

    std::unique_ptr<launched_process> m_process;
    // Sockets before their watchers: a watcher must be destroyed before its socket.
    std::unique_ptr<zmq::socket_t> m_shell;
    std::unique_ptr<zmq_watcher> m_shell_watcher;
    std::unique_ptr<zmq::socket_t> m_control;
    uv_timer m_ready_deadline;
    uv_timer m_poll_timer;   // connection file polling, then kernel_info resends
    uv_timer m_escalation;   // SIGTERM, then SIGKILL, during stop
    uv_timer m_code_deadline;
    uv_timer m_heartbeat;          // next beat
    uv_timer m_heartbeat_deadline; // the beat in flight must be answered by then
};

} // namespace kpool::daemon
