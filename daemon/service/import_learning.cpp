// import_learning: plans, reports, rebuilds and the state file of the pools that learn their
// imports.
#include "daemon/service/import_learning.hpp"

#include "loop/logging.hpp"
#include "protocol/text.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace kpool::daemon {

using json = nlohmann::json;
namespace zp = protocol::zygote;

namespace {

constexpr std::size_t max_request_env = 256; // names remembered per pool

std::set<std::string> as_set(const std::vector<std::string>& v) { return {v.begin(), v.end()}; }

double mtime_of(const std::string& path) {
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
        return -1;
    }
    return static_cast<double>(st.st_mtim.tv_sec) + static_cast<double>(st.st_mtim.tv_nsec) / 1e9;
}

} // namespace

import_learning::import_learning(uv_loop_t* loop, launcher_registry& launchers,
                                 std::string state_dir)
    : m_loop(loop), m_launchers(launchers), m_state_dir(std::move(state_dir)), m_check(loop),
      m_later(loop) {
    load_state();
    const auto every = std::chrono::duration_cast<std::chrono::milliseconds>(check_every);
    m_check.start(
        every, [this] { check_files(); }, every);
    m_check.unref();
}

zp::preload_plan import_learning::configure(const config::pool_config& pc,
                                            const std::vector<std::string>& kernel_env) {
    auto [it, added] = m_pools.try_emplace(pc.name);
    pool_learning& p = it->second;
    p.kernel_env.clear();
    for (const std::string& entry : kernel_env) {
        if (const auto eq = entry.find('='); eq != std::string::npos) {
            p.kernel_env[entry.substr(0, eq)] = entry.substr(eq + 1);
        }
    }
    const bool same_kernels =
        !added && p.config.kernelspec == pc.kernelspec && p.config.python == pc.python;
    p.config = pc;
    if (added || !same_kernels) {
        p.learner = import_learner{};
        p.files.clear();
        const json& saved = m_saved.value(pc.name, json::object());
        if (pc.preload == config::preload_mode::learn &&
            saved.value("kernelspec", "") == pc.kernelspec &&
            saved.value("python", "") == pc.python) {
            p.learner.from_state(saved);
        }
    }
    p.plan = plan_of(p);
    return p.plan;
}

void import_learning::forget(const std::string& pool) { m_pools.erase(pool); }

void import_learning::requests_set(const std::string& pool,
                                   const std::map<std::string, std::string>& env) {
    auto it = m_pools.find(pool);
    if (it == m_pools.end()) {
        return;
    }
    pool_learning& p = it->second;
    for (const auto& [name, value] : env) {
        if (p.request_env.size() >= max_request_env) {
            break;
        }
        const auto same = p.kernel_env.find(name);
        if (same == p.kernel_env.end() || same->second != value) {
            p.request_env.insert(name);
        }
    }
}

zp::preload_plan import_learning::plan_of(const pool_learning& p) const {
    zp::preload_plan plan;
    plan.max_mb = p.config.preload_max_mb;
    plan.prefault = config::to_string(p.config.prefault);
    plan.request_env.assign(p.request_env.begin(), p.request_env.end());
    switch (p.config.preload) {
    case config::preload_mode::learn: plan.modules = p.learner.wanted(); break;
    case config::preload_mode::list: plan.modules = p.config.preload_modules; break;
    case config::preload_mode::off: break;
    }
    return plan;
}

void import_learning::kernel_used(const std::string& pool, const zp::imports& report) {
    auto it = m_pools.find(pool);
    if (it == m_pools.end() || it->second.config.preload != config::preload_mode::learn) {
        return;
    }
    pool_learning& p = it->second;
    p.learner.kernel_used(report.modules, report.other, static_cast<std::uint64_t>(report.pid),
                          report.running);
    if (as_set(p.learner.wanted()) != as_set(p.learner.preloaded())) {
        maybe_rebuild(pool, p, "its kernels' imports changed what it should pre-import");
    }
}

void import_learning::maybe_rebuild(const std::string& pool, pool_learning& p,
                                    const std::string& why) {
    if (m_launchers.rebuilding(pool)) {
        return; // its outcome (built, rebuild_failed) looks again
    }
    const auto now = std::chrono::steady_clock::now();
    if (p.rebuilds > 0 && now - p.last_rebuild < rebuild_every) {
        if (!m_later.active()) {
            const auto wait = std::chrono::duration_cast<std::chrono::milliseconds>(
                rebuild_every - (now - p.last_rebuild));
            m_later.start(wait + std::chrono::milliseconds(1), [this, pool, why] {
                if (auto it = m_pools.find(pool); it != m_pools.end()) {
                    maybe_rebuild(pool, it->second, why);
                }
            });
        }
        return;
    }
    p.plan = plan_of(p);
    if (m_launchers.rebuild(pool, p.plan)) {
        p.last_rebuild = now;
        ++p.rebuilds;
        p.last_rebuild_why = why;
        loop::logger("daemon")->info(
            "pool {}: rebuilding its zygote ({}) to pre-import {} module(s)", pool, why,
            p.plan.modules.size());
    }
}

void import_learning::built(const std::string& pool, const zp::ready& ready) {
    auto it = m_pools.find(pool);
    if (it == m_pools.end()) {
        return;
    }
    pool_learning& p = it->second;
    std::vector<std::string> preloaded;
    for (const auto& m : ready.preload.preloaded) {
        preloaded.push_back(m.name);
    }
    const json before = p.learner.state();
    // What the plan asked for and the zygote neither has nor refused is refused too, so that a
    // plan the zygote cannot carry out is not asked for again and again.
    auto refused = ready.preload.refused;
    const auto have = as_set(preloaded);
    for (const std::string& name : p.plan.modules) {
        const bool said = std::any_of(refused.begin(), refused.end(),
                                      [&](const auto& r) { return r.first == name; });
        if (!have.contains(name) && !said) {
            refused.emplace_back(name, "the zygote did not pre-import it");
        }
    }
    p.learner.built(preloaded, refused);
    p.files = ready.preload.preloaded;
    p.growth_mb = ready.preload.growth_mb;
    if (p.config.preload == config::preload_mode::learn) {
        if (p.learner.state() != before) {
            save_state();
        }
        if (as_set(p.learner.wanted()) != as_set(p.learner.preloaded())) {
            maybe_rebuild(pool, p, "more was learned while it was built");
        }
    }
}

void import_learning::rebuild_failed(const std::string& pool, const std::string& why) {
    auto it = m_pools.find(pool);
    if (it == m_pools.end()) {
        return;
    }
    pool_learning& p = it->second;
    // Which of the new modules did it is not known: all of them are refused, with why.
    std::vector<std::pair<std::string, std::string>> refused;
    const auto had = as_set(p.learner.preloaded());
    for (const std::string& name : p.plan.modules) {
        if (!had.contains(name)) {
            refused.emplace_back(name, why);
        }
    }
    p.learner.built(p.learner.preloaded(), refused);
    save_state();
}

void import_learning::check_files() {
    for (auto& [pool, p] : m_pools) {
        for (const zp::preloaded_module& m : p.files) {
            if (m.file.empty()) {
                continue;
            }
            // Python's st_mtime and ours may differ in the last bits: a millisecond is a change.
            if (std::abs(mtime_of(m.file) - m.mtime) > 1e-3) {
                loop::logger("daemon")->info(
                    "pool {}: {} changed on disk ({}): the zygote is rebuilt", pool,
                    protocol::echo_safe(m.name), protocol::echo_safe(m.file));
                p.files.clear(); // once: the rebuild's ready sets them again
                maybe_rebuild(pool, p, protocol::echo_safe(m.name) + " changed on disk");
                break;
            }
        }
    }
}

json import_learning::describe(const std::string& pool) const {
    auto it = m_pools.find(pool);
    if (it == m_pools.end()) {
        return nullptr;
    }
    const pool_learning& p = it->second;
    json out =
        p.config.preload == config::preload_mode::learn ? p.learner.describe() : json::object();
    out["mode"] = config::to_string(p.config.preload);
    if (p.config.preload == config::preload_mode::list) {
        out["listed"] = p.config.preload_modules;
    }
    out["max_mb"] = p.config.preload_max_mb;
    out["growth_mb"] = p.growth_mb;
    out["rebuilds"] = p.rebuilds;
    out["last_rebuild_why"] = p.last_rebuild_why.empty() ? json(nullptr) : json(p.last_rebuild_why);
    out["rebuilding"] = m_launchers.rebuilding(pool);
    out["request_env"] = p.request_env;
    return out;
}

void import_learning::load_state() {
    std::ifstream in(state_file());
    if (!in) {
        return;
    }
    std::stringstream text;
    text << in.rdbuf();
    const json j = json::parse(text.str(), nullptr, false);
    if (!j.is_object() || !j.value("pools", json()).is_object()) {
        loop::logger("daemon")->warn("{}: not kpoold's learned imports; learning from scratch",
                                     state_file());
        return;
    }
    m_saved = j["pools"];
}

void import_learning::save_state() {
    json pools = m_saved; // pools not configured now keep what they learned
    for (const auto& [name, p] : m_pools) {
        if (p.config.preload != config::preload_mode::learn) {
            continue;
        }
        json entry = p.learner.state();
        entry["kernelspec"] = p.config.kernelspec;
        entry["python"] = p.config.python;
        pools[name] = std::move(entry);
    }
    m_saved = pools;
    const json doc = {{"version", 1}, {"pools", pools}};
    const std::string text = doc.dump(2) + "\n";
    std::error_code ec;
    std::filesystem::create_directories(m_state_dir, ec);
    ::chmod(m_state_dir.c_str(), 0700);
    const std::string tmp = state_file() + ".tmp";
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    if (fd >= 0) {
        ok = ::fsync(fd) == 0 && ok;
        ::close(fd);
    }
    ok = ok && ::rename(tmp.c_str(), state_file().c_str()) == 0;
    if (!ok) {
        ::unlink(tmp.c_str());
        if (!m_warned_save) {
            loop::logger("daemon")->warn(
                "cannot save what the pools learned to {}: {} (learned again after a restart)",
                state_file(), std::strerror(errno));
            m_warned_save = true;
        }
    }
}

} // namespace kpool::daemon
