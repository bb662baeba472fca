// daemon: startup, kernels, deadlines, signals and orderly shutdown.
#include "daemon/service/daemon.hpp"

#include "config/paths.hpp"
#include "daemon/process/instance_dir.hpp"
#include "daemon/process/runtime_files.hpp"
#include "kpool/version.hpp"
#include "languages/language.hpp"
#include "loop/logging.hpp"
#include "protocol/control.hpp"
#include "protocol/stamps.hpp"
#include "protocol/text.hpp"

#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <stdexcept>

namespace kpool::daemon {
namespace {

using namespace std::chrono_literals;

std::chrono::milliseconds to_ms(double seconds) {
    return std::chrono::milliseconds(static_cast<std::int64_t>(seconds * 1000));
}

std::vector<resource_limit> resource_limits(const config::kernel_limits& limits) {
    std::vector<resource_limit> out;
    constexpr std::uint64_t mib = 1024 * 1024;
    if (limits.address_space_mb > 0) {
        out.push_back({RLIMIT_AS, static_cast<std::uint64_t>(limits.address_space_mb) * mib});
    }
    if (limits.cpu_seconds > 0) {
        out.push_back({RLIMIT_CPU, static_cast<std::uint64_t>(limits.cpu_seconds)});
    }
    if (limits.open_files > 0) {
        out.push_back({RLIMIT_NOFILE, static_cast<std::uint64_t>(limits.open_files)});
    }
    return out;
}

// The daemon's CURVE secret key from its file (Z85 text), refusing a file others could read.
result<std::string> read_curve_secret_key(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        return error{errc::internal, "curve_secret_key_file " + path + ": " + std::strerror(errno)};
    }
    if ((st.st_mode & 077) != 0 || st.st_uid != ::geteuid()) {
        return error{errc::internal, "curve_secret_key_file " + path +
                                         " must belong to this user and be readable by it alone "
                                         "(chmod 600)"};
    }
    auto text = read_small_file(path, 1024);
    if (!text) {
        return text.err();
    }
    std::string z85 = *text;
    while (!z85.empty() && std::isspace(static_cast<unsigned char>(z85.back()))) {
        z85.pop_back();
    }
    std::string key(32, '\0');
    if (z85.size() != 40 ||
        zmq_z85_decode(reinterpret_cast<std::uint8_t*>(key.data()), z85.c_str()) == nullptr) {
        return error{errc::internal, "curve_secret_key_file " + path +
                                         " must hold a 40-character Z85 secret key "
                                         "(`kpool keygen` writes one)"};
    }
    return key;
}

} // namespace

std::string make_kernel_id() { return protocol::random_uuid(); }

void daemon::use_kernel_ports(const config::daemon_config& cfg) {
    kernel_port_plan plan = plan_kernel_ports(cfg, ephemeral_port_range());
    if (plan.why == m_kernel_ports_why) {
        return;
    }
    const auto& range = plan.range;
    loop::logger("daemon")->info("tcp kernels' ports: {} ({})",
                                 range ? fmt::format("{}-{}", range->first, range->last)
                                       : std::string("the OS's choice"),
                                 plan.why);
    m_ports.draw_from(range);
    m_kernel_ports_why = std::move(plan.why);
}

std::unique_ptr<pool> daemon::make_pool(const config::pool_config& pc) {
    return std::make_unique<pool>(pc, m_budget, static_cast<kernel_driver&>(*this),
                                  static_cast<waiter_sink&>(*this), make_kernel_id);
}

daemon::daemon(config::config cfg, std::string config_path)
    : m_cfg(std::move(cfg)), m_config_path(std::move(config_path)),
      m_notify(sd_notifier::from_environment()) {
    if (int rc = uv_loop_init(&m_loop); rc != 0) {
        throw std::runtime_error(std::string("uv_loop_init: ") + uv_strerror(rc));
    }
    m_kernels_dir = m_cfg.daemon.runtime_dir + "/kernels";
    m_launchers = std::make_unique<launcher_registry>(&m_loop);
    m_budget.max = m_cfg.daemon.max_kernels;
    for (const auto& pc : m_cfg.pools) {
        m_pools.emplace(pc.name, make_pool(pc));
    }
    m_deadline_timer = std::make_unique<loop::uv_timer>(&m_loop);
}

daemon::~daemon() {
    // The whole teardown, in this order, here and nowhere else (field order does not matter):
    // the control socket, then the ZAP handler it asks about connections, then the endpoint
    // lock (after the unbind); the kernels (process groups killed; their ports and ipc
    // directories are still registered); the pools; timers and signal watchers; the launchers
    // (zygotes, then the spawner thread joined); the metrics endpoint. Then the loop runs until
    // every handle has closed, and only then do the ipc socket directories and the instance
    // directory go, with nothing left that could write into them.
    m_control.reset();
    m_zap.reset();
    m_endpoint_lock.reset();
    m_kernels.clear();
    m_pools.clear();
    m_removed_pools.clear();
    m_deadline_timer.reset();
    m_watchdog_timer.reset();
    m_signals.clear();
    m_launchers->set_events({}); // nothing reaches import learning from here on
    m_learning.reset();
    m_launchers.reset();
    m_metrics.reset();
    uv_walk(
        &m_loop,
        [](uv_handle_t* h, void*) {
            if (uv_is_closing(h) == 0) {
                // Left only on abnormal exits (a process still being reaped): close it anyway so
                // the loop can close.
                uv_close(h, nullptr);
            }
        },
        nullptr);
    uv_run(&m_loop, UV_RUN_DEFAULT);
    if (uv_loop_close(&m_loop) != 0) {
        loop::logger("daemon")->error("event loop closed with handles still open");
    }
    m_ipc_dirs.reset();
    m_instance.reset();
}

int daemon::run() {
    auto log = loop::logger("daemon");
    m_started_at = clock::now();
    for (const std::string& dir : {m_cfg.daemon.runtime_dir, m_kernels_dir}) {
        if (auto st = ensure_private_dir(dir); !st) {
            log->critical("{}", st.err().message);
            return 1;
        }
    }
    const std::string_view ipc = "ipc://";
    if (m_cfg.daemon.restricts_ipc_peers() &&
        m_cfg.daemon.control == config::default_control_endpoint(m_cfg.daemon.runtime_dir)) {
        // Other users must reach the socket inside it: searchable, not listable. The kernels/
        // directory below stays 0700.
        if (::chmod(m_cfg.daemon.runtime_dir.c_str(), 0711) != 0) {
            log->warn("cannot open {} to allowed users: {}", m_cfg.daemon.runtime_dir,
                      std::strerror(errno));
        }
    }
    if (m_cfg.daemon.control.starts_with(ipc)) {
        const std::string path = m_cfg.daemon.control.substr(ipc.size()) + ".lock";
        bool held_elsewhere = false;
        auto lock = file_lock::acquire(path, true, &held_elsewhere);
        if (!lock) {
            log->critical("{}", held_elsewhere
                                    ? "another kpoold (pid " + file_lock::owner_pid(path) +
                                          ") holds " + path +
                                          ": it serves this control endpoint already"
                                    : lock.err().message);
            return 1;
        }
        lock->write_owner_pid();
        m_endpoint_lock.emplace(std::move(lock).value());
    }
    sweep_stale_instances(m_kernels_dir);
    auto instance = instance_dir::create(m_kernels_dir);
    if (!instance) {
        log->critical("{}", instance.err().message);
        return 1;
    }
    m_instance.emplace(std::move(instance).value());
    m_ipc_dirs.emplace(m_instance->path(), m_cfg.daemon.runtime_dir,
                       m_kernels_dir + "/" + m_instance->id() + ".ipc");
    m_cgroups.emplace(m_instance->id());
    resolve_kernelspecs(m_cfg);
    // Before any process is started: kernels and zygotes inherit the RLIMIT_NICE it raises.
    m_priority = cpu_priority::prepare();
    if (background_priority()) {
        log->info("starting and stopping kernels run at SCHED_IDLE (background work)");
    } else if (m_cfg.daemon.background_priority) {
        log->warn("starting kernels run at normal CPU priority: {}", m_priority.why_not);
    }
    use_kernel_ports(m_cfg.daemon);
    m_launchers->set_run(m_instance->path(), m_instance->id(), background_priority());
    m_learning = std::make_unique<import_learning>(&m_loop, *m_launchers, m_cfg.daemon.state_dir);
    m_launchers->set_events(
        {[this](const std::string& pool, const protocol::zygote::ready& r, bool took_over) {
             m_learning->built(pool, r);
             // Warm kernels of the old zygote lack what the new one pre-imports, and so do
             // those spawned while the first one started (say, pre-importing what a restart
             // kept): forks of it replace them (a fork costs little; leased kernels run on).
             const bool cold_inside = took_over || !r.preload.preloaded.empty();
             if (auto it = m_pools.find(pool); cold_inside && it != m_pools.end()) {
                 it->second->replace_unleased(clock::now());
             }
         },
         [this](const std::string& pool, const std::string& why) {
             m_learning->rebuild_failed(pool, why);
         },
         [this](const std::string& pool, const protocol::zygote::imports& m) {
             m_learning->kernel_used(pool, m);
         }});
    for (const auto& pc : m_cfg.pools) {
        m_launchers->configure(pc, kernelspec_of(pc),
                               m_learning->configure(pc, pool_environment(pc)));
    }
    if (auto st = bind_control(); !st) {
        log->critical("{}", st.err().message);
        return 1;
    }
    if (!m_cfg.daemon.metrics.empty()) {
        try {
            m_metrics = std::make_unique<metrics>(m_cfg.daemon.metrics);
        } catch (const std::exception& e) {
            log->critical("cannot serve metrics at {}: {}", m_cfg.daemon.metrics, e.what());
            return 1;
        }
        log->info("metrics at http://{}/metrics", m_cfg.daemon.metrics);
    }
    for (int signum : {SIGINT, SIGTERM, SIGHUP}) {
        watch_signal(signum);
    }
    log->info("kpoold {} started pid={} pools={} max_kernels={}", kpool::version, ::getpid(),
              m_pools.size(), m_budget.max);
    for (auto& [name, p] : m_pools) {
        p->refill(clock::now());
    }
    reschedule();
    // Ready: the config is loaded and the control socket bound, so clients can connect (and
    // wait for warm kernels) from now on.
    m_notify.send("READY=1\nMAINPID=" + std::to_string(::getpid()));
    start_watchdog();
    uv_run(&m_loop, UV_RUN_DEFAULT);
    log->info("kpoold stopped");
    return m_exit_code;
}

status daemon::bind_control() {
    const config::daemon_config& d = m_cfg.daemon;
    control_security security;
    access_policy policy;
    policy.own_uid = ::geteuid();
    policy.allowed_uids.insert(d.allowed_uids.begin(), d.allowed_uids.end());
    policy.allowed_gids.insert(d.allowed_gids.begin(), d.allowed_gids.end());
    if (d.is_tcp()) {
        auto secret = read_curve_secret_key(d.curve_secret_key_file);
        if (!secret) {
            return secret.err();
        }
        security.curve_secret_key = std::move(*secret);
        for (const std::string& z85 : d.curve_allowed_keys) {
            std::string key(32, '\0');
            zmq_z85_decode(reinterpret_cast<std::uint8_t*>(key.data()), z85.c_str());
            policy.allowed_curve_keys.insert(std::move(key));
        }
    }
    security.ask_zap = d.is_tcp() || d.restricts_ipc_peers();
    security.ipc_world_connectable = d.restricts_ipc_peers();
    try {
        if (security.ask_zap) {
            m_zap = std::make_unique<zap_handler>(&m_loop, m_zmq, std::move(policy));
        }
        m_control = std::make_unique<control_server>(
            &m_loop, m_zmq, d.control, security,
            [this](const envelope& env, std::string_view body) { handle_request(env, body); });
    } catch (const zmq::error_t& e) {
        return error{errc::internal,
                     "cannot bind the control socket " + d.control + ": " + e.what()};
    }
    return ok_status();
}

status daemon::start_kernel(pool& owner, const std::string& id, bool awaited) {
    if (auto st = m_fd_headroom.reserve_for_start(clock::now()); !st) {
        return st;
    }
    const config::pool_config& pc = owner.config();
    const auto& spec = kernelspec_of(pc);
    if (!spec) {
        return spec.err();
    }
    kernel_setup setup{.id = id,
                       .pool = pc.name,
                       .spec = spec->spec,
                       .program = spec->program,
                       .kernels_dir = m_instance->path(),
                       .instance = m_instance->id(),
                       .transport = pc.transport,
                       .ip = pc.ip,
                       .ipc_prefix = {},
                       .ports = nullptr,
                       .ready_timeout = to_ms(pc.ready_timeout_s),
                       .shutdown_grace = to_ms(pc.shutdown_grace_s),
                       .limits = resource_limits(pc.limits),
                       .heartbeat_interval = to_ms(pc.heartbeat_s),
                       .heartbeat_timeout = to_ms(pc.heartbeat_timeout_s),
                       .startup_code = pc.startup_code,
                       .priming = pc.prime ? languages::priming_requests(spec->spec.language)
                                           : std::vector<nlohmann::json>{},
                       .background_priority = background_priority(),
                       .awaited = awaited,
                       .background_limit = to_ms(m_cfg.daemon.background_limit_s),
                       .sandbox = {},
                       .sandbox_helper = {},
                       .cgroup = {}};
    if (pc.isolation == config::isolation_kind::sandbox) {
        const sandbox_plan* plan = sandbox_of(pc.name);
        if (plan == nullptr || !plan->problem.empty()) {
            return error{errc::unavailable, "cannot sandbox the kernel: " +
                                                (plan ? plan->problem : std::string("no plan"))};
        }
        auto cgroup = cgroup_for(pc, id);
        if (!cgroup) {
            return cgroup.err();
        }
        setup.sandbox = plan->base;
        setup.sandbox_helper = plan->helper;
        setup.helper_launcher = &m_launchers->spawner();
        setup.cgroup = std::move(*cgroup);
        if (!setup.cgroup) {
            limits_without_cgroup(pc.limits, *setup.sandbox, setup.limits);
        }
    }
    if (pc.transport == "ipc") {
        auto prefix = m_ipc_dirs->prefix_for(short_name(++m_kernels_started));
        if (!prefix) {
            return prefix.err();
        }
        setup.ipc_prefix = std::move(*prefix);
    } else {
        setup.ports = &m_ports;
    }
    auto kernel =
        std::make_unique<kernel_process>(&m_loop, m_zmq, m_launchers->launcher_for(pc.name),
                                         std::move(setup), static_cast<kernel_events&>(*this));
    if (auto st = kernel->start(); !st) {
        return st;
    }
    m_kernels.add(id, std::move(kernel), owner);
    return ok_status();
}

const sandbox_plan* daemon::sandbox_of(const std::string& pool) const {
    auto it = m_sandboxes.find(pool);
    return it == m_sandboxes.end() ? nullptr : &it->second;
}

result<std::shared_ptr<kernel_cgroup>> daemon::cgroup_for(const config::pool_config& pc,
                                                          const std::string& id) {
    if ((pc.limits.memory_mb == 0 && pc.limits.processes == 0) || m_cgroups->how().empty()) {
        return std::shared_ptr<kernel_cgroup>();
    }
    auto group = m_cgroups->create(id, pc.limits.memory_mb, pc.limits.processes);
    if (!group) {
        return group.err();
    }
    return std::shared_ptr<kernel_cgroup>(std::move(*group));
}

void daemon::kernel_spawned(const std::string& id, int pid) {
    if (pool* p = m_kernels.pool_of(id)) {
        p->on_spawned(id, pid);
    }
}

void daemon::hurry(const std::string& id) {
    if (kernel_process* k = m_kernels.process(id)) {
        k->hurry();
    }
}

void daemon::watch_kernel(const std::string& id, bool watched) {
    if (kernel_process* k = m_kernels.process(id)) {
        k->watch(watched);
    }
}

void daemon::kernel_unresponsive(const std::string& id, const std::string& reason) {
    if (pool* p = m_kernels.pool_of(id)) {
        p->on_unresponsive(id, reason, clock::now());
    }
    reschedule();
}

void daemon::stop_kernel(const std::string& id) {
    if (kernel_process* k = m_kernels.process(id)) {
        k->stop(m_shutting_down ? kernel_process::urgency::awaited
                                : kernel_process::urgency::background);
    }
}

void daemon::kernel_starved(const std::string&) { ++m_starved_starts; }

void daemon::kernel_warm(const std::string& id) {
    if (pool* p = m_kernels.pool_of(id)) {
        const kernel_process& k = *m_kernels.process(id);
        if (m_metrics) {
            m_metrics->observe_time_to_warm(
                p->config().name,
                std::chrono::duration<double>(clock::now() - k.started_at()).count());
        }
        p->on_warm(id, k.connection(), k.connection_file(), clock::now());
    }
    reschedule();
}

void daemon::kernel_start_failed(const std::string& id, const std::string& reason) {
    if (pool* p = m_kernels.pool_of(id)) {
        p->on_start_failed(id, reason, clock::now());
    }
    reschedule();
}

void daemon::kernel_exited(const std::string& kernel_id, const exit_status& status,
                           const std::string& output_tail) {
    // Copies: the arguments live in the kernel_process destroyed below.
    const std::string id = kernel_id;
    std::string reason = status.describe();
    if (!output_tail.empty()) {
        const std::size_t keep = 300;
        reason +=
            "; output: " + protocol::echo_safe(output_tail.size() > keep
                                                   ? output_tail.substr(output_tail.size() - keep)
                                                   : output_tail);
    }
    pool* p = m_kernels.pool_of(id);
    m_kernels.remove_exited(id, status);
    m_fd_headroom.released();
    if (p != nullptr) {
        p->on_exited(id, reason, clock::now());
    }
    if (m_launchers->has_retired() || m_shutting_down) {
        m_launchers->collect(m_shutting_down && m_kernels.empty());
    }
    // A removed pool goes once its last kernel has.
    std::erase_if(m_removed_pools, [this](const std::unique_ptr<pool>& removed) {
        if (!removed->empty()) {
            return false;
        }
        if (m_metrics) {
            m_metrics->forget(removed->config().name);
        }
        return true;
    });
    // The room this kernel took under max_kernels may let another pool refill or serve.
    for (auto& [name, other] : m_pools) {
        other->refill(clock::now());
    }
    reschedule();
    finish_if_done();
}

bool daemon::granted(waiter_id waiter, const kernel_entry& kernel) {
    auto it = m_pending.find(waiter);
    if (it == m_pending.end()) {
        return false;
    }
    pending_acquire pending = std::move(it->second);
    m_pending.erase(it);
    return hand_over(std::move(pending), kernel);
}

void daemon::failed(waiter_id waiter, const error& err) {
    auto it = m_pending.find(waiter);
    if (it == m_pending.end()) {
        return;
    }
    send_reply(it->second.env, protocol::make_error_reply(err, it->second.req_id));
    m_pending.erase(it);
}

void daemon::reschedule() {
    publish_state();
    std::optional<clock::time_point> next;
    for_each_pool([&next](pool& p) {
        auto d = p.next_deadline();
        if (d && (!next || *d < *next)) {
            next = d;
        }
    });
    if (!next) {
        m_deadline_timer->stop();
        return;
    }
    // At least 1 ms: a timer re-armed for "now" inside its own callback would run again
    // before the loop ever polls for I/O.
    const auto delay = std::chrono::ceil<std::chrono::milliseconds>(*next - clock::now());
    m_deadline_timer->start(std::max(delay, 1ms), [this] {
        const auto now = clock::now();
        for_each_pool([now](pool& p) { p.expire(now); });
        reschedule();
    });
}

void daemon::watch_signal(int signum) {
    m_signals.push_back(
        std::make_unique<loop::uv_signal>(&m_loop, signum, [this](int sig) { on_signal(sig); }));
}

void daemon::on_signal(int signum) {
    auto log = loop::logger("daemon");
    if (signum == SIGHUP) {
        if (!m_shutting_down) {
            reload();
        }
        return;
    }
    if (!m_shutting_down) {
        log->info("received {}: shutting down", strsignal(signum));
        begin_shutdown();
        return;
    }
    log->warn("received {} again: killing every kernel now", strsignal(signum));
    m_kernels.for_each_process([](kernel_process& k) { k.signal(SIGKILL); });
}

void daemon::begin_shutdown() {
    m_shutting_down = true;
    m_notify.send("STOPPING=1");
    const auto now = clock::now();
    for_each_pool([now](pool& p) { p.shut_down(now); });
    // Kernels that were already stopping in the background are now awaited too.
    m_kernels.for_each_process([](kernel_process& k) { k.stop(kernel_process::urgency::awaited); });
    reschedule();
    finish_if_done();
}

void daemon::finish_if_done() {
    if (!m_shutting_down || !m_kernels.empty()) {
        return;
    }
    // Nothing is left running: release every handle so uv_run returns.
    m_launchers->collect(true); // not from here: we may be inside a zygote's callback
    m_control.reset();
    m_zap.reset();
    m_deadline_timer->stop();
    m_refill_timers.clear();
    m_watchdog_timer.reset();
    m_signals.clear();
}

void daemon::start_watchdog() {
    const auto interval = m_notify.watchdog_interval();
    if (!interval) {
        return;
    }
    // Pinged from the loop itself: a loop stuck anywhere stops the pings, and systemd restarts
    // the service.
    m_watchdog_timer = std::make_unique<loop::uv_timer>(&m_loop);
    m_watchdog_timer->start(
        *interval, [this] { m_notify.send("WATCHDOG=1"); }, *interval);
    m_watchdog_timer->unref(); // never what keeps the loop running
}

void daemon::publish_state() {
    if (m_notify.enabled()) {
        std::string line;
        for (const auto& [name, p] : m_pools) {
            line += fmt::format("{}{}: {} warm, {} starting, {} leased{}", line.empty() ? "" : "; ",
                                name, p->count(kernel_state::warm),
                                p->count(kernel_state::starting), p->count(kernel_state::leased),
                                p->failing()   ? " (failing)"
                                : p->drained() ? " (drained)"
                                               : "");
        }
        m_notify.status(m_shutting_down ? "shutting down: " + line : line);
    }
    if (m_metrics) {
        for_each_pool([this](pool& p) { m_metrics->update(p); });
    }
}

} // namespace kpool::daemon
