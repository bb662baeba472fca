// kernel_process: launch, readiness probe over the wire protocol, heartbeats, graceful stop.
// What runs on a kernel handed out (setup code, the context, the workdir): kernel_code.cpp.
#include "daemon/process/kernel_process.hpp"

#include "daemon/process/cpu_priority.hpp"
#include "daemon/process/instance_dir.hpp"
#include "daemon/process/kernel_environment.hpp"
#include "daemon/process/runtime_files.hpp"
#include "daemon/process/sandbox_plan.hpp"
#include "languages/language.hpp"
#include "loop/logging.hpp"
#include "protocol/hmac.hpp"
#include "protocol/text.hpp"
#include "protocol/wire.hpp"

#include <unistd.h>

#include <csignal>
#include <cstring>

namespace kpool::daemon {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;

constexpr auto connection_file_poll = 20ms;
constexpr auto kernel_info_resend = 1000ms;
constexpr std::size_t output_tail_bytes = 4096;

double seconds_since(std::chrono::steady_clock::time_point t) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

} // namespace

kernel_process::kernel_process(uv_loop_t* loop, zmq::context_t& zmq, launcher& launcher,
                               kernel_setup setup, kernel_events& events)
    : m_loop(loop), m_zmq(zmq), m_launcher(launcher), m_setup(std::move(setup)), m_events(events),
      m_session(protocol::random_hex(16)), m_shell(loop, zmq, "kernel " + m_setup.id + " shell"),
      m_control(loop, zmq, "kernel " + m_setup.id + " control"), m_ready_deadline(loop),
      m_poll_timer(loop), m_background_limit(loop), m_code_deadline(loop),
      m_heartbeat(loop, m_setup.heartbeat_interval, m_setup.heartbeat_timeout,
                  {[this] { return send_heartbeat(); },
                   [this](const std::string& reason) {
                       loop::logger("kernel")->warn("kernel {} pool={} pid={}: {}", m_setup.id,
                                                    m_setup.pool, pid(), reason);
                       m_events.kernel_unresponsive(m_setup.id, reason); // may stop this kernel
                   }}),
      m_stopping(
          loop, m_setup.shutdown_grace,
          {[this] { send_shutdown_request(); }, [this] { return hurry_teardown(); },
           [this](int signum) { m_process->signal_group(signum); },
           [this] {
               loop::logger("kernel")->warn("kernel {} ignored SIGTERM; sending SIGKILL",
                                            m_setup.id);
           },
           [this] { return pid() > 0 ? cpu_priority::cpu_wait_ns(pid(), priority_reach()) : 0ULL; },
           [this](double seconds) {
               loop::logger("kernel")->debug(
                   "kernel {} pool={} pid={}: still shutting down and kept waiting "
                   "for a CPU {:.1f} s after its shutdown_request; one more grace",
                   m_setup.id, m_setup.pool, pid(), seconds);
           }}) {
    if (m_setup.sandbox) {
        m_workdir.emplace(m_setup.helper_launcher, m_setup.sandbox_helper, *m_setup.sandbox);
    }
}

kernel_process::~kernel_process() = default;

launch_spec kernel_process::make_launch_spec() const {
    launch_spec spec;
    spec.argv = jupyter::format_argv(m_setup.spec, m_connection_file);
    if (!m_setup.program.empty()) {
        spec.argv.at(0) = m_setup.program;
    }
    spec.env = kernel_environment(m_setup.spec, m_setup.instance);
    spec.limits = m_setup.limits;
    spec.connection_file = m_connection_file;
    spec.idle = wants_idle();
    if (m_setup.sandbox) {
        spec.sandbox = *m_setup.sandbox;
        spec.sandbox->files.push_back(m_connection_file);
        if (m_info.transport == "ipc") { // the kernel makes its sockets there
            spec.sandbox->writable.push_back(m_info.ip.substr(0, m_info.ip.rfind('/')));
        }
        if (m_setup.cgroup) {
            spec.sandbox->cgroup_procs = m_setup.cgroup->procs();
        }
        spec.sandbox_helper = m_setup.sandbox_helper;
    }
    return spec;
}

bool kernel_process::wants_idle() const {
    return m_setup.background_priority && !m_setup.awaited &&
           (m_phase == phase::created || m_phase == phase::probing || m_phase == phase::preheating);
}

int kernel_process::restore_priority() {
    if (!m_launched_idle || pid() <= 0) {
        return 0;
    }
    m_launched_idle = false;
    return cpu_priority::make_normal(pid(), priority_reach());
}

void kernel_process::on_background_limit() {
    if (!m_launched_idle || (m_phase != phase::probing && m_phase != phase::preheating)) {
        return;
    }
    loop::logger("kernel")->warn(
        "kernel {} pool={} pid={}: still starting after {:.1f} s at idle CPU "
        "priority (the host had no idle CPU); normal priority from now",
        m_setup.id, m_setup.pool, pid(),
        std::chrono::duration<double>(m_setup.background_limit).count());
    hurry();
    m_events.kernel_starved(m_setup.id);
}

void kernel_process::hurry() {
    m_setup.awaited = true; // a relaunch starts at normal priority too
    if (pid() > 0) {
        restore_priority(); // else on_started does it
    } else if (m_process) {
        m_process->hurry();
    }
}

status kernel_process::start() {
    m_started_at = std::chrono::steady_clock::now();
    m_connection_file = m_setup.kernels_dir + "/kernel-" + m_setup.id + ".json";
    m_info.transport = m_setup.transport;
    m_info.key = protocol::random_hex(32); // 256 bits, fresh for every kernel
    m_info.kernel_name = m_setup.spec.name;
    if (m_setup.transport == "ipc") {
        // jupyter_client's convention: `ip` is the path prefix, channel N is PREFIX-N.
        m_info.ip = m_setup.ipc_prefix;
        if (m_setup.sandbox) {
            auto own = make_private_ipc_dir(m_setup.ipc_prefix, *m_setup.sandbox);
            if (!own) {
                m_phase = phase::exited;
                return own.err();
            }
            m_info.ip = std::move(*own);
        }
        m_info.shell_port = 1;
        m_info.iopub_port = 2;
        m_info.stdin_port = 3;
        m_info.control_port = 4;
        m_info.hb_port = 5;
    } else {
        m_info.ip = m_setup.ip;
    }
    if (auto st = launch(); !st) {
        m_phase = phase::exited;
        return st;
    }
    m_ready_deadline.start(
        std::chrono::duration_cast<std::chrono::milliseconds>(m_setup.ready_timeout), [this] {
            fail_start(fmt::format("no {} within {:.1f} s ({} kernel_info_request{} sent)",
                                   m_awaited_reply,
                                   std::chrono::duration<double>(m_setup.ready_timeout).count(),
                                   m_probes_sent, m_probes_sent == 1 ? "" : "s"));
        });
    if (m_launched_idle && m_setup.background_limit.count() > 0) {
        m_background_limit.start(m_setup.background_limit, [this] { on_background_limit(); });
    }
    return ok_status();
}

status kernel_process::assign_ports() {
    if (m_setup.ports == nullptr) {
        return error{errc::internal, "no port registry for a tcp kernel"};
    }
    m_ports = port_reservation(); // the old ones back first: they may be the lost ones
    auto ports = m_setup.ports->reserve(m_info.ip);
    if (!ports) {
        return ports.err();
    }
    m_ports = std::move(ports).value();
    const auto& p = m_ports.ports();
    m_info.shell_port = p[0];
    m_info.iopub_port = p[1];
    m_info.stdin_port = p[2];
    m_info.control_port = p[3];
    m_info.hb_port = p[4];
    return ok_status();
}

status kernel_process::launch() {
    if (m_info.transport == "tcp") {
        if (auto st = assign_ports(); !st) {
            return st;
        }
    }
    if (auto st = write_private_file(m_connection_file, protocol::dump_json(to_json(m_info)));
        !st) {
        return st;
    }
    // A sandboxed kernel of a root kpoold runs as the sandbox's user: its file is that user's.
    if (m_setup.sandbox && !m_setup.sandbox->user_namespace &&
        ::chown(m_connection_file.c_str(), m_setup.sandbox->uid, m_setup.sandbox->gid) != 0) {
        return error{errc::internal, "chown " + m_connection_file + ": " + std::strerror(errno)};
    }
    m_launched_idle = wants_idle();
    m_ever_idle = m_ever_idle || m_launched_idle;
    auto process =
        m_launcher.launch(make_launch_spec(), {[this](int pid) { on_started(pid); },
                                               [this](std::string_view out) { append_output(out); },
                                               [this](const exit_status& st) { on_exit(st); }});
    if (!process) {
        remove_kernel_files(m_connection_file, m_info);
        if (m_setup.sandbox && m_info.transport == "ipc") {
            remove_private_ipc_dir(m_info.ip);
        }
        return process.err();
    }
    m_process = std::move(process).value();
    begin_probe();
    return ok_status();
}

void kernel_process::on_started(int pid) {
    loop::logger("kernel")->debug("kernel starting id={} pool={} pid={} spawn_ms={:.1f}",
                                  m_setup.id, m_setup.pool, pid,
                                  seconds_since(m_started_at) * 1000);
    if (m_launched_idle && m_setup.awaited) {
        restore_priority(); // hurried before it existed
    }
    m_events.kernel_spawned(m_setup.id, pid);
}

bool kernel_process::lost_a_port() const {
    if (m_info.transport != "tcp") {
        return false;
    }
    for (std::uint16_t port : m_ports.ports()) {
        if (port_registry::taken_by_another(m_info.ip, port)) {
            return true;
        }
    }
    return false;
}

void kernel_process::open_shell() {
    m_shell.open(m_info.endpoint(m_info.shell_port), m_info.key, m_session);
}

void kernel_process::close_shell() { m_shell.close(); }

void kernel_process::begin_probe() {
    m_phase = phase::probing;
    m_awaited_reply = "kernel_info_reply";
    try {
        open_shell();
    } catch (const zmq::error_t& e) { // out of file descriptors, most likely
        fail_start(std::string("cannot connect to the kernel's shell socket: ") + e.what());
        return;
    }
    // The first request waits in the socket until the kernel has bound its shell port. Resent
    // every second, as jupyter_client's wait_for_ready does: cheap, and robust against a request
    // that arrives before the kernel's shell handler is listening.
    m_poll_timer.start(
        0ms, [this] { send_kernel_info_request(); }, kernel_info_resend);
}

void kernel_process::send_kernel_info_request() {
    // Every probe's answer means the same: whichever comes first ends the probing.
    ++m_probes_sent;
    m_shell.send("kernel_info_request", json::object(),
                 [this](const protocol::wire_message& reply) {
                     if (m_phase != phase::probing || reply.msg_type() != "kernel_info_reply") {
                         return;
                     }
                     preheat();
                 });
}

void kernel_process::watch(bool on) {
    if (!on || m_phase != phase::ready) {
        m_heartbeat.stop();
        if (!m_code_done) {
            close_shell();
        }
        return;
    }
    m_heartbeat.start();
}

bool kernel_process::send_heartbeat() {
    try {
        open_shell();
    } catch (const zmq::error_t& e) {
        loop::logger("kernel")->warn("kernel {}: no heartbeat this time: {}", m_setup.id, e.what());
        return false;
    }
    m_shell.send("kernel_info_request", json::object(),
                 [this](const protocol::wire_message& reply) {
                     if (reply.msg_type() != "kernel_info_reply" || !m_heartbeat.answered()) {
                         return; // answered after the watch ended
                     }
                     // Between beats an unleased kernel costs the daemon no socket: its file
                     // descriptors stay the same whether or not it has been beaten (a connection
                     // per beat is cheap).
                     if (!m_code_done) {
                         close_shell();
                     }
                 });
    return true;
}

void kernel_process::preheat() {
    m_phase = phase::preheating;
    m_poll_timer.stop(); // no more kernel_info resends
    if (m_setup.startup_code.empty()) {
        prime(0);
    } else {
        run_startup_code();
    }
}

void kernel_process::run_startup_code() {
    // Silent: no execute_result, no history entry, no execution count; the ready deadline
    // still runs, so startup_code that hangs fails the start too.
    m_awaited_reply = "execute_reply to startup_code";
    m_shell.send("execute_request", languages::traceless_execute(m_setup.startup_code),
                 [this](const protocol::wire_message& reply) {
                     if (m_phase == phase::preheating && reply.msg_type() == "execute_reply") {
                         on_startup_reply(reply);
                     }
                 });
}

void kernel_process::on_startup_reply(const protocol::wire_message& msg) {
    const json& content = msg.content;
    if (content.value("status", "") == "ok") {
        loop::logger("kernel")->debug("kernel {}: startup_code ran in {:.0f} ms since launch",
                                      m_setup.id, seconds_since(m_started_at) * 1000);
        prime(0);
        return;
    }
    const std::string traceback = protocol::traceback_text(content.value("traceback", json()));
    loop::logger("kernel")->error(
        "kernel {} pool={}: startup_code failed:\n{}", m_setup.id, m_setup.pool,
        traceback.substr(traceback.size() > 4000 ? traceback.size() - 4000 : 0));
    fail_start("startup_code raised " + content.value("ename", std::string("an error")) + ": " +
               content.value("evalue", std::string()));
}

void kernel_process::prime(std::size_t next) {
    if (next == m_setup.priming.size()) {
        become_ready();
        return;
    }
    // Under the ready deadline and still at background priority, like startup_code.
    m_awaited_reply =
        fmt::format("execute_reply to priming execute {} of {}", next + 1, m_setup.priming.size());
    m_shell.send("execute_request", m_setup.priming[next],
                 [this, next](const protocol::wire_message& reply) {
                     if (m_phase != phase::preheating || reply.msg_type() != "execute_reply") {
                         return;
                     }
                     if (reply.content.value("status", "") != "ok") {
                         loop::logger("kernel")->warn(
                             "kernel {} pool={}: priming execute {} answered {}: {}", m_setup.id,
                             m_setup.pool, next + 1,
                             reply.content.value("status", std::string("?")),
                             protocol::echo_safe(reply.content.value("evalue", std::string())));
                     }
                     prime(next + 1);
                 });
}

void kernel_process::become_ready() {
    m_ready_deadline.stop();
    m_background_limit.stop();
    m_poll_timer.stop();
    close_shell(); // reopened by the heartbeat if the kernel is watched
    // The file clients get holds all nine fields, kernel_name included.
    if (auto st = write_private_file(m_connection_file, protocol::dump_json(to_json(m_info)));
        !st) {
        fail_start(st.err().message);
        return;
    }
    // Before anyone can have it: a kernel left at SCHED_IDLE would run its user's code only
    // on CPU nobody else wants. Walked again even when a hurry already did, as its threads are
    // all there now: one that its creator started at SCHED_IDLE just as the hurry walked could
    // have been missed then.
    m_launched_idle = m_launched_idle || m_ever_idle;
    if (const int rc = restore_priority(); rc != 0) {
        fail_start(std::string("cannot give the kernel normal CPU priority back: ") +
                   std::strerror(-rc));
        return;
    }
    m_phase = phase::ready;
    loop::logger("kernel")->debug("kernel warm id={} pool={} pid={} ms={:.0f}", m_setup.id,
                                  m_setup.pool, pid(), seconds_since(m_started_at) * 1000);
    m_events.kernel_warm(m_setup.id);
}

void kernel_process::fail_start(const std::string& reason) {
    if (m_phase != phase::probing && m_phase != phase::preheating) {
        return;
    }
    loop::logger("kernel")->error(
        "kernel failed to start id={} pool={} pid={}: {}; output tail: {}", m_setup.id,
        m_setup.pool, pid(), reason,
        protocol::echo_safe(
            m_output_tail.substr(m_output_tail.size() > 512 ? m_output_tail.size() - 512 : 0)));
    stop();
    m_events.kernel_start_failed(m_setup.id, reason);
}

void kernel_process::stop(urgency how) {
    if (how == urgency::awaited && m_setup.background_priority) {
        m_setup.awaited = true;
        if (pid() > 0) {
            m_launched_idle = false;
            m_teardown_idle = false;
            cpu_priority::make_normal(pid(), priority_reach());
        } else if (m_process) {
            m_process->hurry(); // a fork still in progress at SCHED_IDLE
        }
    }
    if (m_phase == phase::stopping || m_phase == phase::exited || m_phase == phase::created) {
        return;
    }
    // A kernel still probing may not have bound its control port yet; one that answered has.
    const bool channels_known = m_phase == phase::preheating || m_phase == phase::ready;
    finish_code(error{errc::internal, "the kernel is being shut down"});
    m_phase = phase::stopping;
    m_ready_deadline.stop();
    m_background_limit.stop();
    m_poll_timer.stop();
    watch(false);
    close_shell();
    loop::logger("kernel")->debug("kernel stopping id={} pool={} pid={}", m_setup.id, m_setup.pool,
                                  pid());
    // Its teardown (atexit, interpreter finalisation) is background work too, unless awaited.
    if (m_setup.background_priority && how == urgency::background && pid() > 0) {
        m_launched_idle = false;
        m_teardown_idle = cpu_priority::make_idle(pid(), priority_reach()) == 0;
    }
    m_stopping.begin(channels_known);
}

bool kernel_process::hurry_teardown() {
    if (!m_teardown_idle || pid() <= 0) {
        return false;
    }
    m_teardown_idle = false;
    const double grace = std::chrono::duration<double>(m_setup.shutdown_grace).count();
    // Most likely the host had no idle CPU to give it; or its atexit work is slow.
    loop::logger("kernel")->info(
        "kernel {} pool={} pid={}: still shutting down after {:.1f} s at idle "
        "CPU priority; normal priority and {:.1f} s more before SIGTERM",
        m_setup.id, m_setup.pool, pid(), grace, grace);
    cpu_priority::make_normal(pid(), priority_reach());
    return true;
}

void kernel_process::send_shutdown_request() {
    send_control("shutdown_request", {{"restart", false}});
}

void kernel_process::handed_out() {
    try {
        m_control.open(m_info.endpoint(m_info.control_port), m_info.key, m_session);
    } catch (const zmq::error_t& e) {
        loop::logger("kernel")->warn("kernel {}: cannot open its control channel: {}", m_setup.id,
                                     e.what());
    }
}

void kernel_process::send_control(std::string_view msg_type, json content) {
    try {
        // Replies (shutdown_reply, interrupt_reply) are read and dropped, not left queued.
        m_control.open(m_info.endpoint(m_info.control_port), m_info.key, m_session);
        m_control.send(msg_type, std::move(content));
    } catch (const zmq::error_t& e) {
        loop::logger("kernel")->warn("kernel {}: cannot send {}: {}", m_setup.id, msg_type,
                                     e.what());
    }
}

int kernel_process::signal(int signum) {
    if (!m_process || exited()) {
        return -ESRCH;
    }
    if (signum == SIGINT && m_setup.spec.interrupt_mode == "message") {
        // Such a kernel interrupts itself on request (and may not handle SIGINT at all).
        loop::logger("kernel")->info(
            "kernel {}: interrupt_mode is message: interrupt_request on control", m_setup.id);
        send_control("interrupt_request", json::object());
        return 0;
    }
    return m_process->signal_group(signum);
}

void kernel_process::append_output(std::string_view bytes) {
    m_output_tail.append(bytes);
    if (m_output_tail.size() > output_tail_bytes) {
        m_output_tail.erase(0, m_output_tail.size() - output_tail_bytes);
    }
    // A ZeroMQ kernel that cannot bind a port says so (strerror's EADDRINUSE) but does not always
    // exit: ipykernel 6 stays up when its iopub or heartbeat port was taken, its other threads
    // running. Waiting for its kernel_info_reply would take the whole ready timeout (a test's
    // pool sat 60 s without its kernel); it is stopped now, and started again as one that exits.
    if (m_phase == phase::probing && !m_bind_failed && m_process &&
        m_output_tail.find("Address already in use") != std::string::npos) {
        m_bind_failed = true;
        loop::logger("kernel")->warn(
            "kernel {} pool={} pid={} could not bind one of its ports (its output says so): "
            "stopping it",
            m_setup.id, m_setup.pool, pid());
        m_process->signal_group(SIGKILL);
    }
}

void kernel_process::on_exit(exit_status status) {
    if ((m_phase == phase::probing || m_phase == phase::preheating) && !m_relaunched &&
        (m_bind_failed || lost_a_port())) {
        // Another process bound one of our ports between our choice and the kernel's bind:
        // not the kernelspec's fault. Once more, with fresh ports.
        m_relaunched = true;
        m_bind_failed = false;
        loop::logger("kernel")->warn(
            "kernel {} pool={}: another process took one of its ports before it "
            "could bind them; starting it again with fresh ports",
            m_setup.id, m_setup.pool);
        m_poll_timer.stop();
        close_shell();
        m_control.close();
        m_output_tail.clear();
        m_process.reset(); // inside its own exit callback: launchers allow that
        if (launch()) {
            return;
        }
    }
    const bool expected = m_phase == phase::stopping;
    m_phase = phase::exited;
    if (m_setup.cgroup && m_setup.cgroup->oom_killed()) {
        status.reason =
            "out of memory (limit " + std::to_string(m_setup.cgroup->memory_mb()) + " MiB)";
    }
    finish_code(error{errc::internal, "the kernel exited: " + status.describe()});
    if (m_workdir) {
        m_workdir->kernel_gone(error{errc::internal, "the kernel exited: " + status.describe()});
    }
    m_ready_deadline.stop();
    m_background_limit.stop();
    m_poll_timer.stop();
    m_stopping.cancel();
    watch(false);
    close_shell();
    m_control.close();
    remove_kernel_files(m_connection_file, m_info);
    if (m_setup.sandbox && m_info.transport == "ipc") {
        remove_private_ipc_dir(m_info.ip);
    }
    m_ports = port_reservation(); // the kernel is gone: its ports may go to another
    auto log = loop::logger("kernel");
    // A kernel leaving by itself with status 0 is usually a client's shutdown_request. Its one
    // line at info (its start, warmth, lease, release and stop are at debug: a busy pool's log
    // would otherwise be seven lines a kernel).
    const bool clean = status.code == 0 && status.term_signal == 0;
    log->log(expected || clean ? spdlog::level::info : spdlog::level::warn,
             "kernel exited id={} pool={} pid={} {} after {:.1f} s", m_setup.id, m_setup.pool,
             pid(), status.describe(), seconds_since(m_started_at));
    // Last statement: the handler may destroy this object.
    m_events.kernel_exited(m_setup.id, status, m_output_tail);
}

} // namespace kpool::daemon
