// The control protocol's ops (protocol/PROTOCOL.md), dispatched through a table by op name.
#include "daemon/service/daemon.hpp"
#include "protocol/pool_names.hpp"

#include "daemon/core/refill_delay.hpp"
#include "daemon/process/kernel_environment.hpp"
#include "kpool/version.hpp"
#include "languages/language.hpp"
#include "loop/logging.hpp"
#include "protocol/control.hpp"
#include "protocol/control_ops.hpp"
#include "protocol/op_table.hpp"
#include "protocol/text.hpp"

#include <algorithm>

namespace kpool::daemon {
namespace {

using json = nlohmann::json;
using namespace std::chrono_literals;

// How long a kernel may take to apply a client's cwd and env.
constexpr auto context_timeout = 10000ms;

} // namespace

// How the daemon serves each op of protocol/control_ops' table (which says what the op takes):
// a row per op, in the same order (tests/test_control_messages.cpp compares the two). A new op
// is a row there (its fields and its args struct: protocol/op_table.hpp reads and builds it), a
// row here with its handler (declared
// in daemon.hpp), and its section in PROTOCOL.md. The operator's ops (status, kernelspecs, resize,
// drain) are in operator_ops.cpp.
struct daemon::op_handler {
    std::string_view name;
    std::string (daemon::*handler)(const envelope&, const protocol::control_request&);
    bool answers_later;       // may return "" and reply later (through the envelope)
    bool while_shutting_down; // still served once shutdown began
};

const std::vector<daemon::op_handler>& daemon::op_table() {
    static const std::vector<op_handler> ops = {
        {"ping", &daemon::op_ping, false, true},
        {"acquire", &daemon::op_acquire, true, false},
        {"release", &daemon::op_release, false, false},
        {"signal", &daemon::op_signal, false, false},
        {"poll", &daemon::op_poll, false, false},
        {"renew", &daemon::op_renew, false, false},
        {"context", &daemon::op_context, true, false},
        {"status", &daemon::op_status, false, true},
        {"kernelspecs", &daemon::op_kernelspecs, false, false},
        {"resize", &daemon::op_resize, false, false},
        {"drain", &daemon::op_drain, false, false},
    };
    return ops;
}

std::vector<std::string_view> daemon::served_ops() {
    std::vector<std::string_view> names;
    for (const op_handler& h : op_table()) {
        names.push_back(h.name);
    }
    return names;
}

void daemon::handle_request(const envelope& env, std::string_view body) {
    auto log = loop::logger("control");
    auto req = protocol::parse_control_request(body);
    if (!req) {
        log->warn("bad request: {}", req.err().message);
        send_reply(env, protocol::make_error_reply(req.err(), protocol::salvage_req_id(body)));
        return;
    }
    log->debug("request op={}", protocol::echo_safe(req->op));
    const auto& ops = op_table();
    auto op = std::find_if(ops.begin(), ops.end(),
                           [&](const op_handler& o) { return o.name == req->op; });
    std::string reply;
    if (op == ops.end()) {
        std::string known;
        for (const protocol::op_spec& o : protocol::control_ops()) {
            known += (known.empty() ? "" : ", ") + std::string(o.name);
        }
        reply = protocol::make_error_reply(
            {errc::unknown_op,
             "unknown op '" + protocol::echo_safe(req->op) + "' (known: " + known + ")"},
            req->req_id);
    } else if (m_shutting_down && !op->while_shutting_down) {
        reply = protocol::make_error_reply({errc::shutting_down, "the daemon is shutting down"},
                                           req->req_id);
    } else {
        reply = (this->*(op->handler))(env, *req);
        if (reply.empty() && !op->answers_later) {
            // A handler bug must still leave the client with its one reply.
            log->error("op {} produced no reply", op->name);
            reply =
                protocol::make_error_reply({errc::internal, "no reply was produced"}, req->req_id);
        }
    }
    if (!reply.empty()) {
        send_reply(env, reply);
    }
    reschedule();
}

std::string daemon::op_ping(const envelope&, const protocol::control_request& req) {
    if (auto st = protocol::read_request(protocol::ops::ping, req.body); !st) {
        return protocol::make_error_reply(st.err(), req.req_id);
    }
    return protocol::make_ok_reply(
        {{"protocol", control_protocol_version}, {"version", kpool::version}}, req.req_id);
}

std::string daemon::host_name() const {
    if (!m_cfg.daemon.advertise_host.empty()) {
        return m_cfg.daemon.advertise_host;
    }
    char name[256] = {};
    return ::gethostname(name, sizeof name - 1) == 0 ? std::string(name) : std::string();
}

json daemon::acquire_reply_fields(const kernel_entry& kernel) {
    json connection = to_json(kernel.connection);
    // Clients on other hosts connect to the kernel where the daemon says it can be reached.
    if (!m_cfg.daemon.advertise_host.empty() && kernel.connection.transport == "tcp") {
        connection["ip"] = m_cfg.daemon.advertise_host;
    }
    pool* p = m_kernels.pool_of(kernel.id);
    return {{"kernel_id", kernel.id},
            {"pool", kernel.pool},
            {"pid", kernel.pid},
            {"connection", std::move(connection)},
            {"connection_file", kernel.connection_file},
            // What is left, so clients of several daemons know where to ask next.
            {"pool_warm", p != nullptr ? p->count(kernel_state::warm) : 0}};
}

std::string daemon::op_acquire(const envelope& env, const protocol::control_request& req) {
    auto args = protocol::read_request(protocol::ops::acquire, req.body);
    if (!args) {
        return protocol::make_error_reply(args.err(), req.req_id);
    }
    pool* found = pool_for_kernel_name(args->pool);
    if (found == nullptr) {
        return unknown_kernel_name_reply(args->pool, req.req_id);
    }
    pool& p = *found;
    const std::string pool_name = p.config().name;
    std::string setup_code;
    std::optional<languages::kernel_context> context;
    const languages::kernel_context wanted =
        wanted_context(p.config(), args->cwd, args->env, args->memory_history);
    learn_request_env(pool_name, args->env);
    if (wanted.cwd || !wanted.env.empty() || wanted.memory_history) {
        // Rendered before a kernel is taken, so an impossible request costs the pool nothing.
        auto code = context_code_for(p.config(), wanted);
        if (!code) {
            return protocol::make_error_reply(code.err(), req.req_id);
        }
        setup_code = std::move(*code);
        if (p.config().context_snippet.empty()) {
            context = wanted;
        }
    }
    const auto timeout = args->timeout_ms ? std::chrono::milliseconds(*args->timeout_ms)
                                          : protocol::default_acquire_timeout;
    const waiter_id waiter = m_next_waiter++;
    const auto now = clock::now();
    pending_acquire pending{
        env, req.req_id, pool_name, now, std::move(setup_code), std::move(context), wanted.cwd};
    // Registered before asking the pool, which may answer through granted() right away.
    m_pending.emplace(waiter, pending);
    auto outcome = p.acquire(waiter, timeout, args->lease_s, now);
    if (std::holds_alternative<acquire_queued>(outcome)) {
        return {}; // answered by granted() or failed()
    }
    m_pending.erase(waiter);
    if (auto* err = std::get_if<error>(&outcome)) {
        return protocol::make_error_reply(*err, req.req_id);
    }
    const kernel_entry& kernel = *std::get<const kernel_entry*>(outcome);
    const bool applies_context = !pending.setup_code.empty();
    if (!hand_over(std::move(pending), kernel)) {
        p.return_unseen(kernel.id, now);
    }
    // After the reply is on its way; with cwd/env, once they are applied (hand_over): a refill's
    // fork and launch work would otherwise take the CPU from the execute the client waits for
    // (measured from Python, 2 cores: an acquire with cwd/env took 15-23 ms, now 10-13 ms).
    if (!applies_context) {
        refill_after_acquire(pool_name);
    }
    return {};
}

void daemon::refill_after_acquire(const std::string& pool_name) {
    pool* p = active_pool(pool_name);
    if (p == nullptr) {
        return;
    }
    const auto delay =
        refill_delay_for(m_cfg.daemon, p->config(), m_launchers->forks(pool_name)).duration();
    // The delay keeps a refill away from the first cells of a client that came to an idle
    // pool. Kernels still starting mean a refill is already under way beside those cells; waiting
    // would only slow the pool's refill under steady load.
    if (delay.count() == 0 || p->count(kernel_state::warm) == 0 ||
        p->count(kernel_state::starting) > 0) {
        p->refill(clock::now());
        return;
    }
    auto& timer = m_refill_timers[pool_name];
    if (!timer) {
        timer = std::make_unique<loop::uv_timer>(&m_loop);
    }
    if (timer->active()) {
        return; // a burst: its first acquire's refill is already due
    }
    timer->start(delay, [this, pool_name] {
        if (pool* q = active_pool(pool_name)) {
            q->refill(clock::now());
            reschedule();
        }
    });
}

languages::kernel_context daemon::wanted_context(const config::pool_config& pc,
                                                 const std::optional<std::string>& cwd,
                                                 const std::map<std::string, std::string>& env,
                                                 bool memory_history) const {
    // In-memory history is for IPython kernels only: anywhere else it asks for nothing, so it
    // never makes an acquire fail for want of a snippet.
    const auto& spec = kernelspec_of(pc);
    const bool ipython = spec && pc.context_snippet.empty() &&
                         languages::may_have_ipython_history(spec->spec.language);
    return languages::kernel_context{cwd, env, memory_history && ipython};
}

result<std::string> daemon::context_code_for(const config::pool_config& pc,
                                             const languages::kernel_context& context) const {
    if (pc.isolation == config::isolation_kind::sandbox && context.cwd) {
        if (!within_roots(*context.cwd, pc.sandbox.roots)) {
            return error{errc::bad_request,
                         "cwd '" + protocol::echo_safe(*context.cwd) + "' is outside pool '" +
                             pc.name + "''s sandbox roots" +
                             (pc.sandbox.roots.empty() ? std::string(" (it has none: set [pools.") +
                                                             pc.name + ".sandbox] roots)"
                                                       : "")};
        }
        if (const std::string problem = workdir_problem(*context.cwd, pc.sandbox.roots);
            !problem.empty()) {
            return error{errc::bad_request,
                         "cwd '" + protocol::echo_safe(*context.cwd) + "': " + problem};
        }
    }
    if (!pc.context_snippet.empty()) {
        return languages::render_context_snippet(pc.context_snippet, context);
    }
    const auto& spec = kernelspec_of(pc);
    const std::string language = spec ? spec->spec.language : "unknown";
    if (!languages::has_builtin_context_snippet(language)) {
        return error{
            errc::bad_request,
            "pool '" + pc.name + "' runs kernels of language '" + language +
                "', for which kpool has no cwd/env snippet: set context_snippet in [pools." +
                pc.name + "] or leave out cwd and env"};
    }
    return languages::builtin_context_code(language, context);
}

bool daemon::send_acquire_reply(const pending_acquire& pending, const kernel_entry& kernel) {
    if (!send_reply(pending.env,
                    protocol::make_ok_reply(acquire_reply_fields(kernel), pending.req_id))) {
        return false;
    }
    m_kernels.mark_delivered(kernel.id);
    if (kernel_process* proc = m_kernels.process(kernel.id)) {
        proc->handed_out();
    }
    const double seconds = std::chrono::duration<double>(clock::now() - pending.since).count();
    if (pool* p = m_kernels.pool_of(kernel.id)) {
        p->record_acquire_latency(seconds);
    }
    if (m_metrics) {
        m_metrics->observe_acquire(kernel.pool, seconds);
    }
    const kernel_process* proc = m_kernels.process(kernel.id);
    const char* context = pending.setup_code.empty() ? "none"
                          : pending.context && proc != nullptr && proc->applies_context_message()
                              ? "message"
                              : "code";
    loop::logger("pool")->debug(
        "kernel leased id={} pool={} pid={} waited_ms={:.1f} context={}", kernel.id, kernel.pool,
        kernel.pid, std::chrono::duration<double, std::milli>(clock::now() - pending.since).count(),
        context);
    return true;
}

bool daemon::hand_over(pending_acquire pending, const kernel_entry& kernel) {
    if (pending.setup_code.empty()) {
        return send_acquire_reply(pending, kernel);
    }
    const std::string id = kernel.id;
    auto& kernel_proc = *m_kernels.process(id);
    auto applied = [this, id, pending](const status& outcome) {
        pool* p = m_kernels.pool_of(id);
        const kernel_entry* k = nullptr;
        if (p != nullptr) {
            auto it = p->kernels().find(id);
            k = it != p->kernels().end() && it->second.state == kernel_state::leased ? &it->second
                                                                                     : nullptr;
        }
        if (!outcome || k == nullptr) {
            const error err =
                outcome ? error{errc::internal, "the kernel went away"} : outcome.err();
            loop::logger("pool")->warn("cannot apply cwd/env in kernel {}: {}", id, err.message);
            send_reply(pending.env,
                       protocol::make_error_reply(
                           {err.code, "cannot apply cwd/env in the kernel: " + err.message},
                           pending.req_id));
        }
        // A kernel that ran the client's setup is the client's or nobody's: never warm again.
        if (k != nullptr && (!outcome || !send_acquire_reply(pending, *k))) {
            (void)p->release(id, clock::now());
        }
        refill_after_acquire(pending.pool);
        reschedule();
    };
    set_up_kernel(kernel_proc, pending.cwd, pending.context, pending.setup_code,
                  std::move(applied));
    return true;
}

void daemon::set_up_kernel(kernel_process& k, const std::optional<std::string>& cwd,
                           const std::optional<languages::kernel_context>& context,
                           const std::string& code, kernel_process::code_done done) {
    // A sandboxed kernel's cwd must be in its sandbox before the kernel changes into it.
    k.open_workdir(cwd, [this, id = k.id(), context, code,
                         done = std::move(done)](const status& bound) mutable {
        kernel_process* now = m_kernels.process(id);
        if (!bound || now == nullptr) {
            done(bound ? status(error{errc::internal, "the kernel went away"}) : bound);
            return;
        }
        if (context) {
            now->apply_context(*context, code, context_timeout, std::move(done));
        } else {
            now->run_code(code, context_timeout, std::move(done));
        }
    });
}

pool* daemon::active_pool(const std::string& name) {
    auto it = m_pools.find(name);
    return it == m_pools.end() ? nullptr : it->second.get();
}

pool* daemon::pool_for_kernel_name(const std::string& name) {
    std::vector<protocol::pool_summary> pools;
    for (const auto& [pool_name, p] : m_pools) {
        pools.push_back({pool_name, p->config().kernelspec, p->count(kernel_state::warm)});
    }
    const auto chosen = protocol::resolve_pool_name(name, pools);
    return chosen ? active_pool(*chosen) : nullptr;
}

std::string daemon::unknown_kernel_name_reply(const std::string& name, const json& req_id) const {
    std::string pools;
    for (const auto& [pool_name, p] : m_pools) {
        pools += (pools.empty() ? "" : ", ") + pool_name + " (kernelspec " +
                 p->config().kernelspec + ")";
    }
    return protocol::make_error_reply(
        {errc::unknown_pool, "no pool named '" + protocol::echo_safe(name) +
                                 "' nor one that serves kernelspec '" + protocol::echo_safe(name) +
                                 "' (pools: " + (pools.empty() ? "none" : pools) + ")"},
        req_id);
}

std::string daemon::unknown_pool_reply(const std::string& name, const json& req_id) const {
    return protocol::make_error_reply(
        {errc::unknown_pool, "no pool named '" + protocol::echo_safe(name) + "'"}, req_id);
}

bool daemon::send_reply(const envelope& env, const std::string& body) {
    return m_control != nullptr && m_control->reply(env, body);
}

std::string daemon::op_release(const envelope&, const protocol::control_request& req) {
    auto args = protocol::read_request(protocol::ops::release, req.body);
    if (!args) {
        return protocol::make_error_reply(args.err(), req.req_id);
    }
    pool* p = m_kernels.pool_of(args->kernel_id);
    if (p == nullptr) {
        return protocol::make_error_reply(
            {errc::unknown_kernel, "no kernel '" + protocol::echo_safe(args->kernel_id) + "'"},
            req.req_id);
    }
    if (auto st = p->release(args->kernel_id, clock::now()); !st) {
        return protocol::make_error_reply(st.err(), req.req_id);
    }
    return protocol::make_ok_reply(json::object(), req.req_id);
}

std::string daemon::op_signal(const envelope&, const protocol::control_request& req) {
    auto args = protocol::read_request(protocol::ops::signal, req.body);
    if (!args) {
        return protocol::make_error_reply(args.err(), req.req_id);
    }
    kernel_process* k = m_kernels.delivered(args->kernel_id);
    if (k == nullptr) {
        return protocol::make_error_reply(
            {errc::unknown_kernel,
             "no running kernel '" + protocol::echo_safe(args->kernel_id) + "' held by a client"},
            req.req_id);
    }
    if (int rc = k->signal(args->signum); rc != 0) {
        return protocol::make_error_reply(
            {errc::internal, std::string("cannot signal the kernel: ") + uv_strerror(rc)},
            req.req_id);
    }
    loop::logger("kernel")->info("kernel signalled id={} pid={} signum={}", k->id(), k->pid(),
                                 args->signum);
    return protocol::make_ok_reply(json::object(), req.req_id);
}

std::string daemon::op_poll(const envelope&, const protocol::control_request& req) {
    auto args = protocol::read_request(protocol::ops::poll, req.body);
    if (!args) {
        return protocol::make_error_reply(args.err(), req.req_id);
    }
    if (m_kernels.delivered(args->kernel_id) != nullptr) {
        return protocol::make_ok_reply({{"alive", true}}, req.req_id);
    }
    if (auto st = m_kernels.exit_of(args->kernel_id)) {
        // Like Popen.returncode: the exit code, or minus the signal that killed it.
        const std::int64_t code = st->term_signal != 0 ? -st->term_signal : st->code;
        json reply = {{"alive", false}, {"exit_code", code}};
        if (!st->reason.empty()) {
            reply["reason"] = st->reason; // "out of memory (limit 512 MiB)"
        }
        return protocol::make_ok_reply(reply, req.req_id);
    }
    return protocol::make_error_reply(
        {errc::unknown_kernel,
         "no kernel '" + protocol::echo_safe(args->kernel_id) + "' was handed out"},
        req.req_id);
}

std::string daemon::op_renew(const envelope&, const protocol::control_request& req) {
    auto args = protocol::read_request(protocol::ops::renew, req.body);
    if (!args) {
        return protocol::make_error_reply(args.err(), req.req_id);
    }
    pool* p = m_kernels.pool_of(args->kernel_id);
    if (p == nullptr) {
        return protocol::make_error_reply(
            {errc::unknown_kernel, "no kernel '" + protocol::echo_safe(args->kernel_id) + "'"},
            req.req_id);
    }
    if (auto st = p->renew(args->kernel_id, args->lease_s, clock::now()); !st) {
        return protocol::make_error_reply(st.err(), req.req_id);
    }
    return protocol::make_ok_reply({{"lease_remaining_s", args->lease_s}}, req.req_id);
}

std::vector<std::string> daemon::pool_environment(const config::pool_config& pc) const {
    const auto& spec = kernelspec_of(pc);
    return spec && m_instance ? kernel_environment(spec->spec, m_instance->id())
                              : std::vector<std::string>{};
}

void daemon::learn_request_env(const std::string& pool,
                               const std::map<std::string, std::string>& env) {
    if (!env.empty()) {
        m_learning->requests_set(pool, env);
    }
}

std::string daemon::op_context(const envelope& env, const protocol::control_request& req) {
    auto args = protocol::parse_context(req.body);
    if (!args) {
        return protocol::make_error_reply(args.err(), req.req_id);
    }
    kernel_process* k = m_kernels.delivered(args->kernel_id);
    pool* p = m_kernels.pool_of(args->kernel_id);
    const auto leased = [&] {
        auto it = p->kernels().find(args->kernel_id);
        return it != p->kernels().end() && it->second.state == kernel_state::leased;
    };
    if (k == nullptr || p == nullptr || !leased()) { // released: stopping, nobody's to change
        return protocol::make_error_reply(
            {errc::unknown_kernel,
             "no running kernel '" + protocol::echo_safe(args->kernel_id) + "' held by a client"},
            req.req_id);
    }
    learn_request_env(p->config().name, args->env);
    const languages::kernel_context context =
        k->still_needed(wanted_context(p->config(), args->cwd, args->env, args->memory_history));
    if (!context.cwd && context.env.empty() && !context.memory_history) {
        // History asked of a kernel that has none, or all of it there already (a spare kpool
        // serve prepared for this request): no trip to the kernel.
        return protocol::make_ok_reply(json::object(), req.req_id);
    }
    auto code = context_code_for(p->config(), context);
    if (!code) {
        return protocol::make_error_reply(code.err(), req.req_id);
    }
    const bool as_message = p->config().context_snippet.empty() && k->applies_context_message();
    auto applied = [this, env, req_id = req.req_id, id = args->kernel_id,
                    as_message](const status& outcome) {
        if (!outcome) {
            loop::logger("pool")->warn("cannot apply cwd/env in kernel {}: {}", id,
                                       outcome.err().message);
            send_reply(env, protocol::make_error_reply(
                                {outcome.err().code,
                                 "cannot apply cwd/env in the kernel: " + outcome.err().message},
                                req_id));
            return;
        }
        loop::logger("pool")->debug("context applied id={} context={}", id,
                                    as_message ? "message" : "code");
        send_reply(env, protocol::make_ok_reply(json::object(), req_id));
    };
    set_up_kernel(*k, context.cwd,
                  p->config().context_snippet.empty()
                      ? std::optional<languages::kernel_context>(context)
                      : std::nullopt,
                  *code, std::move(applied));
    return {};
}

} // namespace kpool::daemon
