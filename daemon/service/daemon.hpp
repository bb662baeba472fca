// kpoold: the event loop that owns the pools, their kernels and the control socket.
//
// One libuv loop, one thread. The daemon is the glue between the parts: it carries out what the
// pools decide (kernel_driver: start and stop kernel_process objects), reports kernel events
// back to the pools (kernel_events), answers requests (request_handlers.cpp) and delivers
// answers to acquires that waited (waiter_sink). A single timer fires at the earliest deadline
// any pool has (waiter timeout, lease expiry, end of a backoff).
#pragma once

#include "config/config.hpp"
#include "daemon/core/pool.hpp"
#include "daemon/process/cpu_priority.hpp"
#include "daemon/process/fd_headroom.hpp"
#include "daemon/process/instance_dir.hpp"
#include "daemon/process/ipc_socket_dirs.hpp"
#include "daemon/process/kernel_process.hpp"
#include "daemon/process/launcher.hpp"
#include "daemon/process/launcher_registry.hpp"
#include "daemon/process/port_registry.hpp"
#include "daemon/process/runtime_files.hpp"
#include "daemon/process/sandbox_plan.hpp"
#include "daemon/service/control_server.hpp"
#include "daemon/service/import_learning.hpp"
#include "daemon/service/kernel_table.hpp"
#include "daemon/service/metrics.hpp"
#include "daemon/service/sd_notify.hpp"
#include "daemon/service/zap_handler.hpp"
#include "jupyter/kernelspec.hpp"
#include "languages/context.hpp"
#include "loop/uv_signal.hpp"
#include "loop/uv_timer.hpp"
#include "protocol/control.hpp"

#include <uv.h>
#include <zmq.hpp>

#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

namespace kpool::daemon {

// A UUID-4 shaped id, like jupyter_server's kernel ids.
std::string make_kernel_id();

class daemon final : private kernel_driver, private waiter_sink, private kernel_events {
public:
    // The names of the ops this daemon serves, in its table's order (tests compare it with
    // protocol::control_ops()).
    static std::vector<std::string_view> served_ops();
    // `config_path` is what SIGHUP re-reads; empty: the embedded default, nothing to re-read.
    daemon(config::config cfg, std::string config_path);
    ~daemon() override;
    daemon(const daemon&) = delete;
    daemon& operator=(const daemon&) = delete;

    // Prepares the runtime directory, binds the control socket, fills the pools and runs until
    // SIGINT/SIGTERM have shut every kernel down. Returns the process exit code.
    int run();

private:
    struct pending_acquire {
        envelope env;
        nlohmann::json req_id;
        std::string pool;
        clock::time_point since;
        // The code that applies the client's cwd/env in the kernel; empty when none was asked.
        std::string setup_code;
        // The cwd/env themselves, when setup_code is kpool's built-in snippet (not a pool's
        // context_snippet): a kernel that takes them as a message gets them so.
        std::optional<languages::kernel_context> context;
        std::optional<std::string> cwd; // the client's, whichever way it is applied
    };

    // kernel_driver
    status start_kernel(pool& owner, const std::string& id, bool awaited) override;
    void stop_kernel(const std::string& id) override;
    void watch_kernel(const std::string& id, bool watched) override;
    void hurry(const std::string& id) override;
    // waiter_sink
    bool granted(waiter_id waiter, const kernel_entry& kernel) override;
    void failed(waiter_id waiter, const error& err) override;
    // kernel_events
    void kernel_spawned(const std::string& id, int pid) override;
    void kernel_warm(const std::string& id) override;
    void kernel_starved(const std::string& id) override;
    void kernel_start_failed(const std::string& id, const std::string& reason) override;
    void kernel_unresponsive(const std::string& id, const std::string& reason) override;
    void kernel_exited(const std::string& id, const exit_status& status,
                       const std::string& output_tail) override;

    // request_handlers.cpp: the ops, dispatched through op_table(). Each returns its reply, or
    // "" when it answers later through the envelope (acquire waits for a kernel, or its cwd/env).
    struct op_handler;
    static const std::vector<op_handler>& op_table();
    void handle_request(const envelope& env, std::string_view body);
    std::string op_ping(const envelope& env, const protocol::control_request& req);
    std::string op_status(const envelope& env, const protocol::control_request& req);
    std::string op_kernelspecs(const envelope& env, const protocol::control_request& req);
    std::string op_release(const envelope& env, const protocol::control_request& req);
    std::string op_signal(const envelope& env, const protocol::control_request& req);
    std::string op_poll(const envelope& env, const protocol::control_request& req);
    std::string op_renew(const envelope& env, const protocol::control_request& req);
    std::string op_context(const envelope& env, const protocol::control_request& req);
    std::string op_resize(const envelope& env, const protocol::control_request& req);
    std::string op_drain(const envelope& env, const protocol::control_request& req);
    std::string op_acquire(const envelope& env, const protocol::control_request& req);
    // Gives a leased kernel to the client: applies cwd/env first if asked, then replies.
    // False if the client could not be reached and the kernel was untouched (back to warm).
    bool hand_over(pending_acquire pending, const kernel_entry& kernel);
    // A client's cwd/env into a kernel it holds: a sandboxed kernel's working directory first
    // (kernel_process::open_workdir), then `context` as a message or `code` run; `done` once.
    void set_up_kernel(kernel_process& k, const std::optional<std::string>& cwd,
                       const std::optional<languages::kernel_context>& context,
                       const std::string& code, kernel_process::code_done done);
    bool send_acquire_reply(const pending_acquire& pending, const kernel_entry& kernel);
    // The environment a pool's zygote and kernels start with ("NAME=value"), for import learning.
    std::vector<std::string> pool_environment(const config::pool_config& pc) const;
    // The variable names an acquire or context op sets, for the pool's import learning.
    void learn_request_env(const std::string& pool, const std::map<std::string, std::string>& env);
    // What an acquire or context op asks of a pool's kernel (history only where it means
    // something).
    languages::kernel_context wanted_context(const config::pool_config& pc,
                                             const std::optional<std::string>& cwd,
                                             const std::map<std::string, std::string>& env,
                                             bool memory_history) const;
    // The code applying a client's cwd/env in the pool's kernels, or why there is none.
    result<std::string> context_code_for(const config::pool_config& pc,
                                         const languages::kernel_context& context) const;
    // Replies on the control socket; false if the client is gone (or the socket is closed).
    bool send_reply(const envelope& env, const std::string& body);
    nlohmann::json acquire_reply_fields(const kernel_entry& kernel);
    // How clients name this daemon: advertise_host, else the host name.
    std::string host_name() const;
    // After an acquire from `pool_name`: its refill, at once when the pool has no warm kernel
    // left or kernels still starting, else the pool's refill delay after the first acquire not
    // yet refilled (daemon/core/refill_delay.hpp).
    void refill_after_acquire(const std::string& pool_name);
    // The pool clients may ask for by `name`, or nullptr (removed pools included).
    pool* active_pool(const std::string& name);
    // The pool an acquire's "pool" names (protocol/pool_names.hpp: its name, else its kernelspec).
    pool* pool_for_kernel_name(const std::string& name);
    std::string unknown_kernel_name_reply(const std::string& name,
                                          const nlohmann::json& req_id) const;
    std::string unknown_pool_reply(const std::string& name, const nlohmann::json& req_id) const;

    // Binds the control socket, with its ZAP handler and CURVE key when the config asks.
    status bind_control();
    // SIGHUP: re-reads the config file and applies it without dropping a kernel; an invalid
    // file is logged with its diagnostic and changes nothing.
    void reload();
    // Why `next` cannot be applied without a restart, if it cannot.
    std::optional<std::string> needs_restart(const config::daemon_config& next) const;
    // Systemd's STATUS line and the metrics, brought up to date after every event.
    void publish_state();
    // Every pool, removed ones (still holding leased kernels) included.
    template <class Fn>
    void for_each_pool(Fn&& fn) {
        for (auto& [name, p] : m_pools) {
            fn(*p);
        }
        for (auto& p : m_removed_pools) {
            fn(*p);
        }
    }
    std::unique_ptr<pool> make_pool(const config::pool_config& pc);
    void start_watchdog();
    void watch_signal(int signum);
    void on_signal(int signum);
    void begin_shutdown();
    void finish_if_done();
    void reschedule();
    // pool_kernelspecs.cpp: kernelspecs.
    // Reads every pool's kernelspec and resolves its program (at start and on reload); a
    // problem is logged with the config position and stays in status until the next reload.
    // Returns the pools whose kernelspec changed since last time.
    std::set<std::string> resolve_kernelspecs(const config::config& cfg);
    const result<resolved_kernelspec>& kernelspec_of(const config::pool_config& pc) const;

    // Where tcp kernels' ports come from (kernel_ports), at start and on reload.
    void use_kernel_ports(const config::daemon_config& cfg);

    config::config m_cfg;
    std::string m_config_path;
    std::string m_kernels_dir;              // runtime_dir/kernels: every run's instance directory
    std::optional<instance_dir> m_instance; // this run's
    std::optional<ipc_socket_dirs> m_ipc_dirs; // inside or beside m_instance
    std::optional<kernel_cgroups> m_cgroups;   // sandboxed kernels' limits, once this run has an id
    // Sandboxed pools' plans (sandbox_plan.hpp), made with their kernelspecs at start and on
    // reload (pool_kernelspecs.cpp), by pool.
    std::map<std::string, sandbox_plan> m_sandboxes;
    const sandbox_plan* sandbox_of(const std::string& pool) const;
    // A sandboxed kernel's cgroup (null: no limit asks for one, or kpoold can make none).
    result<std::shared_ptr<kernel_cgroup>> cgroup_for(const config::pool_config& pc,
                                                      const std::string& id);
    port_registry m_ports;          // tcp ports of live kernels
    std::string m_kernel_ports_why; // where they come from (status)
    fd_headroom m_fd_headroom = fd_headroom::of_this_process();
    std::map<std::string, result<resolved_kernelspec>> m_specs; // by pool name
    uv_loop_t m_loop{};
    zmq::context_t m_zmq;
    std::unique_ptr<launcher_registry> m_launchers;
    std::unique_ptr<import_learning>
        m_learning;                     // after m_launchers, which it rebuilds zygotes with
    cpu_priority::support m_priority;   // whether starting kernels can run as background work
    std::uint64_t m_starved_starts = 0; // starts given normal priority after background_limit_s
    // Whether they do: the config wants it and the daemon may.
    bool background_priority() const {
        return m_priority.available && m_cfg.daemon.background_priority;
    }
    kernel_budget m_budget;
    std::map<std::string, std::unique_ptr<pool>> m_pools;
    // Pools removed by a reload, alive until their last leased kernel is gone.
    std::vector<std::unique_ptr<pool>> m_removed_pools;
    kernel_table m_kernels;
    std::unordered_map<waiter_id, pending_acquire> m_pending;
    waiter_id m_next_waiter = 1;
    std::uint64_t m_kernels_started = 0;
    std::optional<file_lock> m_endpoint_lock; // for an ipc control endpoint
    std::unique_ptr<zap_handler> m_zap;
    std::unique_ptr<control_server> m_control;
    std::unique_ptr<loop::uv_timer> m_deadline_timer;
    std::map<std::string, std::unique_ptr<loop::uv_timer>>
        m_refill_timers; // by pool: refill_after_acquire
    sd_notifier m_notify;
    std::unique_ptr<loop::uv_timer> m_watchdog_timer;
    std::unique_ptr<metrics> m_metrics;
    std::vector<std::unique_ptr<loop::uv_signal>> m_signals;
    clock::time_point m_started_at;
    bool m_shutting_down = false;
    int m_exit_code = 0;
};

} // namespace kpool::daemon
