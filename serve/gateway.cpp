// gateway: the Kernel Gateway API's kernels, REST answers, culling, leases and liveness.
#include "serve/gateway.hpp"

#include "kpool/version.hpp"
#include "loop/logging.hpp"
#include "protocol/control.hpp"
#include "protocol/control_replies.hpp"
#include "protocol/control_requests.hpp"
#include "protocol/stamps.hpp"
#include "protocol/text.hpp"
#include "serve/request_services.hpp"
#include "serve/routing.hpp"

#include <sys/stat.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>

namespace kpool::serve {

using json = nlohmann::json;
using namespace std::chrono_literals;

namespace {

// A kernel that died is replaced at most this many times in a row while no kernel comes in
// time, this far apart (jupyter_client's KernelRestarter: restart_limit 5).
constexpr int died_replace_attempts = 5;
constexpr std::chrono::milliseconds died_replace_pause{1000};

std::string content_type_of(const std::string& file) {
    const std::string ext = std::filesystem::path(file).extension().string();
    if (ext == ".png") {
        return "image/png";
    }
    if (ext == ".svg") {
        return "image/svg+xml";
    }
    if (ext == ".js") {
        return "application/javascript";
    }
    if (ext == ".css") {
        return "text/css";
    }
    if (ext == ".json") {
        return "application/json";
    }
    return "application/octet-stream";
}

// A kernelspec's resources as jupyter_server lists them, from its directory when it can be read.
json resources_of(const std::string& name, const std::string& dir) {
    json out = json::object();
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
        const std::string file = entry.path().filename().string();
        if (!entry.is_regular_file(ec)) {
            continue;
        }
        if (file.starts_with("logo-")) {
            out[std::filesystem::path(file).stem().string()] = "/kernelspecs/" + name + "/" + file;
        } else if (file == "kernel.js" || file == "kernel.css") {
            out[file] = "/kernelspecs/" + name + "/" + file;
        }
    }
    return out;
}

} // namespace

gateway::gateway(request_services& owner)
    : m_owner(owner), m_reaper(owner.loop()), m_cull_timer(owner.loop()) {
    const gateway_options& o = owner.options().gateway;
    if (o.cull_idle_timeout.count() > 0) {
        const auto every =
            std::chrono::duration_cast<std::chrono::milliseconds>(std::max(o.cull_interval, 1s));
        m_cull_timer.start(
            every, [this] { cull(); }, every);
        m_cull_timer.unref();
    }
}

gateway::~gateway() = default;

void gateway::answer(const exchange_ptr& ex, http_response response) {
    m_owner.metrics().answered(route_label(ex->path()), response.status, ex->seconds());
    ex->respond(std::move(response));
}

void gateway::handle(exchange_ptr ex, const do_gateway& g) {
    // Every action its case, no default: an action added to the table without one fails to build.
    switch (g.action) {
    case gateway_action::api_info:
        return answer(
            ex, json_response(200, {{"version", kpool::version}, {"gateway", "kpool serve"}}));
    case gateway_action::list_kernelspecs:
    case gateway_action::get_kernelspec: return kernelspecs(std::move(ex), g);
    case gateway_action::kernelspec_resource: return resource(std::move(ex), g);
    case gateway_action::start_kernel: return start(std::move(ex), g);
    case gateway_action::list_kernels: {
        json list = json::array();
        for (const auto& [id, h] : m_kernels) {
            list.push_back(h.kernel->model());
        }
        return answer(ex, json_response(200, list));
    }
    case gateway_action::get_kernel:
        if (gateway_kernel* k = held_kernel(ex, g.kernel_id)) {
            answer(ex, json_response(200, k->model()));
        }
        return;
    case gateway_action::delete_kernel:
        if (held_kernel(ex, g.kernel_id)) {
            remove(g.kernel_id);
            answer(ex, {204, "application/json", "", {}});
        }
        return;
    case gateway_action::interrupt_kernel:
        if (gateway_kernel* k = held_kernel(ex, g.kernel_id)) {
            m_owner.leases().interrupt(k->lease(), [this, ex](std::optional<std::string> failure) {
                if (failure) {
                    return answer(
                        ex, error_response(502, "daemon_error", "interrupt failed: " + *failure));
                }
                answer(ex, {204, "application/json", "", {}});
            });
        }
        return;
    case gateway_action::restart_kernel:
        if (held_kernel(ex, g.kernel_id)) {
            restart(std::move(ex), g.kernel_id);
        }
        return;
    case gateway_action::channels:
        // The websocket's Origin passed the front door (serve/front_door.hpp) with the request.
        if (gateway_kernel* k = held_kernel(ex, g.kernel_id)) {
            if (auto st = k->connect(*ex, m_owner.options().max_body); !st) {
                answer(ex, error_response(400, "bad_request", st.err().message));
            }
        }
        return;
    }
}

gateway_kernel* gateway::held_kernel(const exchange_ptr& ex, const std::string& id) {
    auto it = m_kernels.find(id);
    if (it == m_kernels.end()) {
        answer(ex, error_response(404, "not_found", "no kernel '" + protocol::echo_safe(id) + "'"));
        return nullptr;
    }
    return it->second.kernel.get();
}

void gateway::served_kernelspecs(std::function<void(result<served_specs>)> done) {
    m_owner.control(
        protocol::requests::status(), 2000ms,
        [this, done](result<json> status, std::size_t daemon) {
            auto pools = status ? protocol::read_status_pools(*status)
                                : result<std::vector<protocol::pool_summary>>(status.err());
            if (!pools) {
                return done(error{errc::unavailable, "no kpoold answered"});
            }
            m_owner.control_at(
                daemon, protocol::requests::kernelspecs(), 2000ms,
                [done, pools = *pools](result<json> specs) {
                    if (!specs || protocol::refusal_of(*specs)) {
                        return done(
                            error{errc::unavailable, "kpoold did not list its kernelspecs"});
                    }
                    json by_name = json::object();
                    for (const json& s : specs->value("kernelspecs", json::array())) {
                        by_name[s.value("name", "")] = s;
                    }
                    served_specs out;
                    // Two pools of one kernelspec would show one display name twice in a notebook's
                    // kernel menu: each then says its pool, "Python 3 (untrusted)".
                    std::map<std::string, int> pools_of_spec;
                    for (const protocol::pool_summary& p : pools) {
                        pools_of_spec[p.kernelspec] += p.removed ? 0 : 1;
                    }
                    for (const protocol::pool_summary& p : pools) {
                        if (p.removed) {
                            continue;
                        }
                        const std::string& name = p.name;
                        const json spec = by_name.value(p.kernelspec, json::object());
                        const std::string dir = spec.value("resource_dir", "");
                        out.first = out.first.empty() ? name : out.first;
                        out.resource_dirs[name] = dir;
                        out.models[name] = {
                            {"name", name},
                            {"spec",
                             {{"argv", spec.value("argv", json::array())},
                              {"env", spec.value("env", json::object())},
                              {"display_name",
                               pools_of_spec[p.kernelspec] > 1 && name != p.kernelspec
                                   ? spec.value("display_name", name) + " (" + name + ")"
                                   : spec.value("display_name", name)},
                              {"language", spec.value("language", "")},
                              {"interrupt_mode", spec.value("interrupt_mode", "signal")},
                              {"metadata", spec.value("metadata", json::object())}}},
                            {"resources", resources_of(name, dir)}};
                    }
                    done(std::move(out));
                });
        });
}

void gateway::kernelspecs(exchange_ptr ex, const do_gateway& g) {
    served_kernelspecs([this, ex, g](result<served_specs> specs) {
        if (!specs) {
            return answer(ex, error_response(503, "unavailable", specs.err().message));
        }
        if (g.action == gateway_action::get_kernelspec) {
            if (!specs->models.contains(g.name)) {
                return answer(ex, error_response(404, "not_found",
                                                 "no kernelspec '" + g.name + "' is served"));
            }
            return answer(ex, json_response(200, specs->models[g.name]));
        }
        const std::string& wanted = m_owner.options().default_kernel;
        answer(ex, json_response(
                       200, {{"default", specs->models.contains(wanted) ? wanted : specs->first},
                             {"kernelspecs", specs->models}}));
    });
}

void gateway::resource(exchange_ptr ex, const do_gateway& g) {
    served_kernelspecs([this, ex, g](result<served_specs> specs) {
        if (!specs) {
            return answer(ex, error_response(503, "unavailable", specs.err().message));
        }
        const auto dir = specs->resource_dirs.find(g.name);
        if (dir == specs->resource_dirs.end()) {
            return answer(
                ex, error_response(404, "not_found", "no kernelspec '" + g.name + "' is served"));
        }
        // g.resource is a plain file name (decide_gateway): nothing outside the directory.
        const std::string file = dir->second + "/" + g.resource;
        struct stat st {};
        if (dir->second.empty() || ::stat(file.c_str(), &st) != 0 || !S_ISREG(st.st_mode) ||
            st.st_size > (4 << 20)) {
            return answer(ex, error_response(404, "not_found",
                                             "no resource '" + g.resource + "' for kernelspec '" +
                                                 g.name + "' here"));
        }
        std::ifstream in(file, std::ios::binary);
        std::ostringstream bytes;
        bytes << in.rdbuf();
        answer(ex, {200, content_type_of(file), bytes.str(), {}});
    });
}

void gateway::release(const kernel_lease& lease, std::function<void()> done) {
    m_owner.leases().release(lease, std::move(done));
}

void gateway::start(exchange_ptr ex, const do_gateway& g) {
    const gateway_options& o = m_owner.options().gateway;
    // As Kernel Gateway: KERNEL_* and the allowed variables only; the server's own environment
    // (and its secrets) never reaches a kernel this way.
    std::map<std::string, std::string> env;
    for (const auto& [k, v] : g.env) {
        if (k.starts_with("KERNEL_") ||
            std::find(o.env_whitelist.begin(), o.env_whitelist.end(), k) != o.env_whitelist.end()) {
            env[k] = v;
        }
    }
    // KERNEL_WORKING_DIR is a path on the notebook server's host: the kernel starts there when
    // it exists here too, else in its own directory (the variable stays in its environment).
    std::string cwd;
    if (auto it = env.find("KERNEL_WORKING_DIR"); it != env.end()) {
        struct stat st {};
        if (!it->second.empty() && it->second.front() == '/' &&
            ::stat(it->second.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
            cwd = it->second;
        } else {
            loop::logger("gateway")->info(
                "KERNEL_WORKING_DIR {} does not exist here: the kernel starts in its own",
                protocol::echo_safe(it->second));
        }
    }
    launch(ex, g.name, cwd, env, [this, ex](std::optional<std::string> id, http_response refusal) {
        if (!id) {
            return answer(ex, std::move(refusal));
        }
        http_response r = json_response(201, *kernel_model(*id));
        r.headers.emplace_back("location", "/api/kernels/" + *id);
        answer(ex, std::move(r));
    });
}

void gateway::launch(const exchange_ptr& ex, const std::string& kernel_name, const std::string& cwd,
                     const std::map<std::string, std::string>& env, launched_fn done) {
    const gateway_options& o = m_owner.options().gateway;
    if (o.max_kernels > 0 && m_kernels.size() + m_starts >= o.max_kernels) {
        return done(std::nullopt,
                    error_response(403, "resource_limit",
                                   "kpool serve holds " + std::to_string(o.max_kernels) +
                                       " kernels (--max-kernels)"));
    }
    const std::string name = kernel_name.empty() ? m_owner.options().default_kernel : kernel_name;
    ++m_starts;
    obtain(name, cwd, env, [this, ex, name, cwd, env, done](obtained kernel) {
        --m_starts;
        if (auto* no = std::get_if<refusal>(&kernel)) {
            return done(std::nullopt, std::move(no->answer));
        }
        connected_kernel& k = std::get<connected_kernel>(kernel);
        ex->set_kernel_id(k.lease.kernel_id);
        if (ex->gone()) {
            // Nobody will know this kernel's id: back it goes.
            release(k.lease);
            m_owner.retire(std::move(k.channels));
            return done(std::nullopt, error_response(502, "kernel_died", "the client went away"));
        }
        const std::string id = protocol::random_uuid();
        const kernel_lease lease = k.lease;
        auto g = std::make_unique<gateway_kernel>(m_owner.loop(), id, name, std::move(k));
        loop::logger("gateway")->info("kernel {} started ({} from kpoold, pool {})", id,
                                      lease.kernel_id, name);
        m_kernels[id] = held{std::move(g), cwd, env, false, watch(id, lease), false, nullptr};
        m_owner.metrics().gateway_kernels().Set(static_cast<double>(m_kernels.size()));
        done(id, {});
    });
}

std::optional<json> gateway::kernel_model(const std::string& id) const {
    const auto it = m_kernels.find(id);
    if (it == m_kernels.end()) {
        return std::nullopt;
    }
    return it->second.kernel->model();
}

void gateway::obtain(const std::string& name, const std::string& cwd,
                     const std::map<std::string, std::string>& env, obtained_fn done) {
    kernel_order order;
    order.pool = name;
    order.cwd = cwd;
    order.env = env;
    order.lease = kernel_leases::holder_terms();
    order.wait = m_owner.options().queue_timeout;
    ++m_obtaining;
    m_owner.held().obtain(order, [this, done = std::move(done)](obtained kernel) {
        --m_obtaining;
        if (auto* k = std::get_if<connected_kernel>(&kernel); k && m_stopping) {
            release_counted(k->lease);
            m_owner.retire(std::move(k->channels)); // its handshake's callback is on the stack
            done(refusal{error_response(503, "unavailable", "kpool serve is stopping")});
        } else {
            done(std::move(kernel));
        }
        finish_release_if_done();
    });
}

kernel_watch gateway::watch(const std::string& id, const kernel_lease& lease) {
    return m_owner.held().watch(
        lease, kernel_leases::holder_terms(),
        {.on_gone = [this, id, kernel_id = lease.kernel_id](const kernel_gone& gone) {
            on_gone(id, kernel_id, gone);
        }});
}

void gateway::on_gone(const std::string& id, const std::string& kernel_id,
                      const kernel_gone& gone) {
    auto it = m_kernels.find(id);
    if (it == m_kernels.end() || it->second.replacing || it->second.mourning ||
        it->second.kernel->lease().kernel_id != kernel_id) {
        return; // a restart or a replacement is under way: it swaps the kernel
    }
    it->second.mourning = true;
    // As Kernel Gateway's restarter: "restarting", then a kernel again.
    loop::logger("gateway")->warn("kernel {} died{}{}: replacing it with a warm one", id,
                                  gone.reason.empty() ? "" : " of ", gone.reason);
    it->second.kernel->announce("restarting", gone.reason);
    replace_dead(id, 1);
}

void gateway::replace_dead(const std::string& id, int attempt) {
    replace(id, "died", [this, id, attempt](http_response r) {
        auto at = m_kernels.find(id);
        if (r.status == 200 || at == m_kernels.end() || !at->second.mourning) {
            return;
        }
        // No kernel in time (a pool refilling on a loaded host, a daemon away for now): nobody
        // waits on this answer, so wait longer than a request would. Anything else is final.
        const bool for_now = r.status == 429 || r.status == 503;
        if (!for_now || attempt >= died_replace_attempts || m_stopping) {
            loop::logger("gateway")->warn("kernel {} could not be replaced after its death: {}", id,
                                          r.body);
            at->second.mourning = false;
            at->second.watch.reset(); // nothing more to learn from the dead lease
            at->second.kernel->announce("dead");
            return;
        }
        loop::logger("gateway")->info(
            "kernel {}: replacement {} of {} refused ({}), trying again in {} ms", id, attempt,
            died_replace_attempts, r.body, died_replace_pause.count());
        replace_dead_later(id, attempt + 1);
    });
}

void gateway::replace_dead_later(const std::string& id, int attempt) {
    held& h = m_kernels.at(id);
    if (!h.retry) {
        h.retry = std::make_unique<loop::uv_timer>(m_owner.loop());
    }
    h.retry->start(died_replace_pause, [this, id, attempt] {
        auto again = m_kernels.find(id);
        if (again == m_kernels.end() || !again->second.mourning) {
            return; // deleted, or a client's restart replaced it meanwhile
        }
        if (again->second.replacing) {
            return replace_dead_later(id, attempt); // a client's restart under way: after it
        }
        replace_dead(id, attempt);
    });
}

void gateway::restart(exchange_ptr ex, const std::string& id) {
    replace(id, "restart", [this, ex](http_response r) { answer(ex, std::move(r)); });
}

void gateway::replace(const std::string& id, const std::string& why,
                      std::function<void(http_response)> done) {
    held& h = m_kernels.at(id);
    if (h.replacing) {
        return done(error_response(409, "conflict", "the kernel is being restarted already"));
    }
    h.replacing = true;
    obtain(h.kernel->name(), h.cwd, h.env, [this, id, why, done](obtained kernel) {
        auto it = m_kernels.find(id);
        auto* k = std::get_if<connected_kernel>(&kernel);
        if (it == m_kernels.end()) {
            if (k != nullptr) {
                release(k->lease); // deleted meanwhile
                m_owner.retire(std::move(k->channels));
            }
            return done(
                error_response(404, "not_found", "the kernel was shut down during its restart"));
        }
        it->second.replacing = false;
        if (k == nullptr) {
            return done(std::move(std::get<refusal>(kernel).answer));
        }
        const kernel_lease fresh = k->lease;
        it->second.mourning = false; // a restart meanwhile ends a replacement's retries too
        const kernel_lease old = it->second.kernel->replace(std::move(*k));
        it->second.watch = watch(id, fresh);
        release(old);
        m_owner.metrics().gateway_replaced(why);
        loop::logger("gateway")->info("kernel {} restarted on {} (was {})", id, fresh.kernel_id,
                                      old.kernel_id);
        done(json_response(200, it->second.kernel->model()));
    });
}

void gateway::remove(const std::string& id) {
    auto node = m_kernels.extract(id);
    if (node.empty()) {
        return;
    }
    std::unique_ptr<gateway_kernel> kernel = std::move(node.mapped().kernel);
    m_owner.metrics().gateway_kernels().Set(static_cast<double>(m_kernels.size()));
    kernel->disconnect_all();
    release(kernel->lease());
    loop::logger("gateway")->info("kernel {} shut down", id);
    retire(std::move(kernel));
}

void gateway::retire(std::unique_ptr<gateway_kernel> kernel) {
    m_retired.push_back(std::move(kernel));
    m_reaper.start(0ms, [this] { m_retired.clear(); });
}

void gateway::cull() {
    const gateway_options& o = m_owner.options().gateway;
    const auto now = std::chrono::system_clock::now();
    std::vector<std::string> idle;
    for (const auto& [id, h] : m_kernels) {
        const gateway_kernel& k = *h.kernel;
        if (now - k.last_activity() >= o.cull_idle_timeout &&
            (o.cull_connected || k.connections() == 0) &&
            (o.cull_busy || k.execution_state() != "busy") && !h.replacing) {
            idle.push_back(id);
        }
    }
    for (const std::string& id : idle) {
        loop::logger("gateway")->info("culling kernel {}: idle for {} s or more", id,
                                      o.cull_idle_timeout.count());
        remove(id);
    }
}

void gateway::release_counted(const kernel_lease& lease) {
    ++m_releasing;
    release(lease, [this] {
        --m_releasing;
        finish_release_if_done();
    });
}

void gateway::release_all(std::function<void()> done) {
    m_stopping = true;
    m_on_released = std::move(done);
    // Kernels still being obtained go back when their obtain ends, and whoever waits for one is
    // answered 503 then (obtain).
    std::vector<std::string> ids;
    for (const auto& [id, h] : m_kernels) {
        ids.push_back(id);
    }
    for (const std::string& id : ids) {
        auto node = m_kernels.extract(id);
        m_owner.metrics().gateway_kernels().Set(static_cast<double>(m_kernels.size()));
        node.mapped().kernel->disconnect_all();
        release_counted(node.mapped().kernel->lease());
        retire(std::move(node.mapped().kernel));
    }
    finish_release_if_done();
}

void gateway::finish_release_if_done() {
    if (!m_stopping || !m_on_released || m_releasing > 0 || m_obtaining > 0) {
        return;
    }
    auto done = std::move(m_on_released);
    m_on_released = nullptr;
    done();
}

} // namespace kpool::serve
