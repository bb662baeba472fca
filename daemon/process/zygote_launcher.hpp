// Launches Python kernels by forking them from a pre-loaded parent (daemon/process/zygote.py), for
// pools with launcher = "fork": ipykernel and IPython are imported once and the kernel app and
// shell pre-built once, so a new kernel costs a fork and its own initialisation instead of a whole
// interpreter start.
//
// kpoold listens on a Unix socket in its run directory, starts the zygote (through the spawn
// launcher, so it dies with kpoold) and sends it one line of JSON per kernel
// (protocol/zygote_protocol.hpp). The zygote reports each child's pid and, being its parent,
// reaps it and reports its exit. Each child sets PR_SET_PDEATHSIG against the zygote, so kernels
// still die with kpoold. Output goes to a log file per kernel, read back when it exits.
//
// While the zygote is not ready (starting, or restarting with backoff after it died), launches
// go to the fallback launcher: the pool keeps filling, only slower. A kernelspec whose argv is
// not `PYTHON -m ipykernel_launcher ...` is always launched by the fallback.
#pragma once

#include "daemon/process/launcher.hpp"
#include "loop/uv_handle.hpp"
#include "loop/uv_timer.hpp"
#include "protocol/zygote_protocol.hpp"

#include <nlohmann/json.hpp>
#include <uv.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

namespace kpool::daemon {

// The arguments after `PYTHON -m ipykernel_launcher` (or `-m ipykernel`), or nothing if the
// kernelspec is not an ipykernel started that way (then a zygote cannot stand in for it).
std::optional<std::vector<std::string>> ipykernel_args(const std::vector<std::string>& argv);

// What a zygote tells its owner besides launches: it is ready (after each start, with what it
// pre-imported), a kernel it forked ended and reported the modules it used, the zygote process
// exited (it restarts itself with backoff unless its owner drops it).
struct zygote_events {
    std::function<void(const protocol::zygote::ready&)> on_ready;
    std::function<void(const protocol::zygote::imports&)> on_imports;
    std::function<void(const exit_status&)> on_exit;
};

class zygote_launcher final : public launcher {
public:
    // `zygote` is how to start the zygote itself (argv ends with the socket path, the startup
    // code, the argument template and whether to prime); `socket_path` is where it connects. `name`
    // names it in logs.
    zygote_launcher(uv_loop_t* loop, launcher& fallback, launch_spec zygote,
                    std::string socket_path, std::string name);
    ~zygote_launcher() override;
    zygote_launcher(const zygote_launcher&) = delete;
    zygote_launcher& operator=(const zygote_launcher&) = delete;

    result<std::unique_ptr<launched_process>> launch(const launch_spec& spec,
                                                     launch_callbacks callbacks) override;

    void set_events(zygote_events events) { m_events = std::move(events); }

    bool ready() const { return m_ready; }
    // No kernel of this zygote is alive (or being forked): it can go.
    bool childless() const { return m_by_pid.empty() && m_by_request.empty(); }
    // For status: readiness, whether kernels are pre-built (and why not), how many were, hot
    // pages.
    nlohmann::json describe() const;

    struct child; // one forked kernel, shared with its launched_process handle

private:
    void start_zygote();
    void on_connection();
    void on_read(std::string_view bytes);
    void on_message(const protocol::zygote::message& msg);
    void on_ready(const protocol::zygote::ready& m);
    void on_forked(const protocol::zygote::forked& m);
    void on_fork_failed(const protocol::zygote::fork_failed& m);
    void on_exited(const protocol::zygote::exited& m);
    void on_learned(const protocol::zygote::learned& m);
    void on_imports(const protocol::zygote::imports& m);
    void on_zygote_exit(const exit_status& status);
    void send_line(const std::string& line);
    void finish_child(const std::shared_ptr<child>& c, exit_status status);

    uv_loop_t* m_loop;
    launcher& m_fallback;
    launch_spec m_zygote_spec;
    std::string m_socket_path;
    std::string m_name;

    struct pipe_handle;
    loop::uv_ptr<pipe_handle> m_server;
    loop::uv_ptr<pipe_handle> m_client; // the zygote's connection
    protocol::zygote::line_splitter m_lines{1 << 20};
    std::unique_ptr<launched_process> m_zygote;
    loop::uv_timer m_restart;
    int m_failures = 0;
    bool m_ready = false;
    zygote_events m_events;
    protocol::zygote::preload_report m_preload;

    // What the zygote said about pre-building, and what came of it.
    struct stats {
        int pid = 0;
        bool prebuilt = false;
        std::string why_not;
        std::uint64_t kernels_prebuilt = 0;
        std::uint64_t kernels_not_prebuilt = 0;
        std::map<std::string, std::uint64_t> not_prebuilt_because;
        std::optional<std::uint64_t> hot_pages; // learned from the first kernel and samples
        std::string hot_pages_why_not;
        std::uint64_t hot_pages_kernels = 0;    // sampled kernels' whole lives learned from
        std::uint64_t launched_by_fallback = 0; // while the zygote was not ready
        std::uint64_t forked_at_idle = 0;       // background requests forked at SCHED_IDLE
    } m_stats;

    std::uint64_t m_next_request = 1;
    std::map<std::uint64_t, std::shared_ptr<child>> m_by_request; // sent, pid not yet known
    std::map<int, std::shared_ptr<child>> m_by_pid;
};

} // namespace kpool::daemon
