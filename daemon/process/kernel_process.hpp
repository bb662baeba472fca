// One kernel's life as an OS process: launch, prove readiness over the wire protocol, shut down.
//
//   probing (from launch: kernel_info_request every second) --(signed kernel_info_reply)-->
//   [preheating: the pool's startup_code, then the priming executes, leaving no trace] --> ready
//   any phase --stop()--> stopping: shutdown_request on control, SIGTERM, SIGKILL to the group
//   any phase --process exits--> exited: files removed, events.kernel_exited()
//
// The daemon chooses the five channels before launch, as jupyter_client does, since only
// ipykernel would choose and write back ports of its own. With tcp they come from the
// port_registry (never two kernels of ours on one port); a kernel that dies before it is ready
// because another process bound one of its ports in the meantime is launched once more with
// fresh ports, not counted as a failed start. With ipc the ports are 1 to 5 after a per-kernel
// socket path prefix (ipc_socket_dirs.hpp), so nothing can collide.
#pragma once

#include "daemon/process/cpu_priority.hpp"
#include "daemon/process/kernel_cgroups.hpp"
#include "daemon/process/kernel_channel.hpp"
#include "daemon/process/kernel_heartbeat.hpp"
#include "daemon/process/kernel_workdir.hpp"
#include "daemon/process/launcher.hpp"
#include "daemon/process/port_registry.hpp"
#include "daemon/process/stop_escalation.hpp"
#include "jupyter/kernelspec.hpp"
#include "languages/context.hpp"
#include "loop/uv_timer.hpp"
#include "protocol/connection_info.hpp"
#include "protocol/wire.hpp"

#include <zmq.hpp>

#include <chrono>
#include <functional>
#include <memory>
#include <string>

namespace kpool::daemon {

using jupyter::kernelspec;
using jupyter::resolved_kernelspec;

// What kernel_process reports; the daemon forwards these to the kernel's pool.
class kernel_events {
public:
    virtual ~kernel_events() = default;
    // The process exists (launching finishes after start() returns).
    virtual void kernel_spawned(const std::string& id, int pid) = 0;
    virtual void kernel_warm(const std::string& id) = 0;
    // Still starting background_limit after launch at SCHED_IDLE: it has normal priority now.
    virtual void kernel_starved(const std::string& id) = 0;
    // Start failed (timeout, bad connection file). The kernel is being stopped; kernel_exited
    // follows.
    virtual void kernel_start_failed(const std::string& id, const std::string& reason) = 0;
    // A ready kernel missed a heartbeat (watch(true)). It keeps running until stopped.
    virtual void kernel_unresponsive(const std::string& id, const std::string& reason) = 0;
    // The process is gone and its files removed. `output_tail` is its last stdout/stderr bytes.
    virtual void kernel_exited(const std::string& id, const exit_status& status,
                               const std::string& output_tail) = 0;
};

struct kernel_setup {
    std::string id;
    std::string pool;
    kernelspec spec;
    // What runs: the kernelspec's argv with argv[0] resolved (resolve_kernel_program).
    std::string program;
    std::string kernels_dir;        // 0700 directory for the connection file
    std::string instance;           // this daemon run's id, given to the kernel as KPOOL_INSTANCE
    std::string transport;          // "tcp" or "ipc"
    std::string ip;                 // tcp: the address the kernel binds
    std::string ipc_prefix;         // ipc: the socket path prefix (ipc_socket_dirs)
    port_registry* ports = nullptr; // tcp: where the kernel's ports come from
    std::chrono::milliseconds ready_timeout{60000};
    std::chrono::milliseconds shutdown_grace{2000};
    std::vector<resource_limit> limits;
    std::chrono::milliseconds heartbeat_interval{0}; // 0: no heartbeat
    std::chrono::milliseconds heartbeat_timeout{5000};
    // Run before the kernel counts as warm (imports, say); an error fails the start.
    std::string startup_code;
    // Then these execute_request contents, in order (languages/language.hpp); an error is
    // logged, not a failed start: priming only saves time.
    std::vector<nlohmann::json> priming;
    // Background work (cpu_priority.hpp): SCHED_IDLE while starting (unless `awaited`) and
    // while stopping; SCHED_OTHER from the moment it is ready.
    bool background_priority = false;
    bool awaited = false; // an acquire waits for this start: normal priority from the first moment
    // Still starting this long after launch at SCHED_IDLE: normal priority (0: no limit), so a
    // host that is never idle still refills.
    std::chrono::milliseconds background_limit{0};
    // isolation = "sandbox": the pool's sandbox (the kernel's connection file and ipc directory
    // are added at launch), the helper that makes it, and the kernel's cgroup if it has one.
    std::optional<protocol::sandbox_spec> sandbox;
    std::string sandbox_helper;
    std::shared_ptr<kernel_cgroup> cgroup;
    launcher* helper_launcher = nullptr; // runs `kpool-sandbox workdir` (a spawn launcher)
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

    // Begins the graceful shutdown sequence; idempotent. kernel_exited follows. A background
    // stop (a released or surplus kernel) runs at SCHED_IDLE, and at normal priority if the
    // kernel is still there when the shutdown grace ends (it then gets another grace before
    // SIGTERM, so that a busy host does not turn its clean exit, atexit included, into a kill);
    // one that someone waits for (the daemon shutting down) at normal priority, also when it
    // began as a background stop: at SCHED_IDLE on a busy host, even a killed kernel could take
    // minutes to go.
    enum class urgency { background, awaited };
    void stop(urgency how = urgency::background);

    // While on (and the kernel ready), sends a kernel_info_request every heartbeat_interval and
    // reports kernel_unresponsive when one is not answered within heartbeat_timeout. Only for
    // idle warm kernels: a kernel a client holds may be busy for hours, and is not ours to poke.
    void watch(bool on);

    // An acquire now waits for this starting kernel: normal CPU priority from now on.
    void hurry();

    // Signal to the kernel's process group; 0 or -errno. For a kernelspec whose
    // interrupt_mode is "message", SIGINT is an interrupt_request on the control channel.
    int signal(int signum);

    // Executes `code` silently (no history, no execution count) in a ready kernel and calls
    // `done` once with the outcome: an error if it raised, timed out, or the kernel went away.
    // One at a time. `done` may destroy nothing but may stop this kernel.
    using code_done = std::function<void(const status&)>;
    void run_code(const std::string& code, std::chrono::milliseconds timeout, code_done done);

    // Applies a client's cwd and env as run_code would run `code` (the built-in snippet that
    // applies them), with the same contract. A kernel that answers kpool_context_request
    // (launched_process::applies_context_message) gets that message on its control channel
    // instead: no cell runs (a silent execute goes through all of IPython's run_cell in a kernel
    // whose pages are still shared with its zygote): an acquire with cwd/env took 8.0 ms p50
    // instead of 11.5 (fork pool of 4, 2 cores).
    void apply_context(const languages::kernel_context& context, const std::string& code,
                       std::chrono::milliseconds timeout, code_done done);

    // A sandboxed kernel's working directory: `cwd` (under its pool's roots) bound into its
    // sandbox by `kpool-sandbox workdir` (daemon/sandbox/workdir.hpp), before the kernel changes
    // into it; `done` as run_code's (bad_request: a cwd the helper refused, or a second one).
    // Done at once for a kernel without a sandbox or a cwd, or with that cwd already. One per
    // kernel: a request's folder is all of the roots it sees, and code that ran in the kernel
    // never gets another.
    void open_workdir(const std::optional<std::string>& cwd, code_done done);

    // The kernel is a client's now: its control channel opens (once connected, a context, an
    // interrupt or the shutdown at release goes out without a connection's handshake first:
    // 1.5 ms of a 5 ms context op on 2 cores) and stays open until the kernel exits.
    void handed_out();

    // `wanted` without what this kernel has already, so that a context asks the kernel for
    // nothing it has (kpool serve's spares are prepared with the context their requests are
    // likely to ask for): the in-memory history once a context moved it there, and the cwd
    // when the kernel's process is in that very directory now (the same inode: a directory
    // removed and made again under the same path is applied again). A sandboxed kernel's cwd
    // is always kept: its pid is its sandbox's, and its workdir has its own rule (open_workdir).
    languages::kernel_context still_needed(languages::kernel_context wanted) const;

    // Whether apply_context sends a message rather than running code.
    bool applies_context_message() const {
        return m_process && m_process->applies_context_message();
    }

    const kernelspec& spec() const { return m_setup.spec; }

    const std::string& id() const { return m_setup.id; }
    int pid() const { return m_process ? m_process->pid() : 0; }
    bool exited() const { return m_phase == phase::exited; }
    const protocol::connection_info& connection() const { return m_info; }
    const std::string& connection_file() const { return m_connection_file; }
    std::chrono::steady_clock::time_point started_at() const { return m_started_at; }

private:
    enum class phase { created, probing, preheating, ready, stopping, exited };

    void on_started(int pid);
    // Chooses the channels (fresh tcp ports), writes the connection file, launches, probes.
    status launch();
    status assign_ports();
    // Whether another process holds one of our tcp ports (the kernel could not bind it).
    bool lost_a_port() const;
    void begin_probe();
    void send_kernel_info_request();
    // One heartbeat on the shell channel; false if it could not be sent.
    bool send_heartbeat();
    void open_shell();
    void close_shell();
    // An execute_reply or kpool_context_reply: ok, or the error it names.
    void on_code_reply(const protocol::wire_message& msg);
    // Arms run_code's deadline for `done`, now the code's request goes out.
    void begin_code(std::chrono::milliseconds timeout, code_done done);
    void finish_code(const status& outcome);
    // Starts preheating: startup_code if any, then priming.
    void preheat();
    void run_startup_code();
    void on_startup_reply(const protocol::wire_message& msg);
    void prime(std::size_t next);
    void become_ready();
    void fail_start(const std::string& reason);
    void send_shutdown_request();
    bool hurry_teardown(); // stop_escalation's hurry: the shutdown grace ended at SCHED_IDLE
    // Sends on the control channel, opening it first; its replies are dropped.
    void send_control(std::string_view msg_type, nlohmann::json content);
    void on_exit(exit_status status);
    void append_output(std::string_view bytes);
    launch_spec make_launch_spec() const;
    // Whether the process should run (or start) at SCHED_IDLE now.
    bool wants_idle() const;
    // Back to SCHED_OTHER if it was launched at SCHED_IDLE; 0 or -errno.
    int restore_priority();
    // A sandboxed kernel is its outer process's grandchild: its priority changes with the whole
    // tree. Others as before, the process alone (walking every kernel's tree made
    // test_multi_daemon.py's failover miss its budget, 3 runs in 3, for a reason not found yet).
    cpu_priority::reach priority_reach() const {
        return m_setup.sandbox ? cpu_priority::reach::tree : cpu_priority::reach::process;
    }
    void on_background_limit();

    uv_loop_t* m_loop;
    zmq::context_t& m_zmq;
    launcher& m_launcher;
    kernel_setup m_setup;
    kernel_events& m_events;

    phase m_phase = phase::created;
    protocol::connection_info m_info;
    std::string m_connection_file;
    port_reservation m_ports;
    bool m_relaunched = false;    // after losing a port: once per kernel
    bool m_bind_failed = false;   // its output said a bind failed: stopped, to be started again
    bool m_launched_idle = false; // the process started at SCHED_IDLE and has not left it
    bool m_ever_idle = false;     // some launch of this kernel started at SCHED_IDLE
    bool m_teardown_idle = false; // a background stop put it at SCHED_IDLE
    std::string m_session;        // our wire-protocol session id with this kernel
    std::string m_output_tail;
    // What the start waits for now, for the ready deadline's message: a kernel that answered
    // kernel_info and hung in startup_code or priming is not one that never answered.
    std::string m_awaited_reply;
    int m_probes_sent = 0;
    code_done m_code_done;                   // run_code's caller, while its code runs
    std::optional<kernel_workdir> m_workdir; // a sandboxed kernel's
    bool m_history_in_memory = false;        // a context moved it there (still_needed)
    std::chrono::steady_clock::time_point m_started_at;

    std::unique_ptr<launched_process> m_process;
    // Requests to the kernel, each reply routed to its continuation: the readiness probe,
    // startup_code, run_code and heartbeats on shell; shutdown and interrupts on control.
    kernel_channel m_shell;
    kernel_channel m_control;
    loop::uv_timer m_ready_deadline;
    loop::uv_timer m_poll_timer;       // kernel_info resends
    loop::uv_timer m_background_limit; // while starting at SCHED_IDLE
    loop::uv_timer m_code_deadline;
    kernel_heartbeat m_heartbeat; // while watched
    stop_escalation m_stopping;   // shutdown_request, SIGTERM, SIGKILL
};

} // namespace kpool::daemon
