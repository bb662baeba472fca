// kernel_workdir: a sandboxed kernel's working directory, bound once (kernel_workdir.hpp).
#include "daemon/process/kernel_workdir.hpp"

#include "protocol/text.hpp"

#include <filesystem>
#include <utility>

namespace kpool::daemon {
namespace {

constexpr std::size_t kept_output = 4096;

// "/srv/jobs/a/../a/" is "/srv/jobs/a": the folder the helper binds, compared as such.
std::string normal_path(const std::string& path) {
    std::string normal = std::filesystem::path(path).lexically_normal().string();
    if (normal.size() > 1 && normal.ends_with('/')) {
        normal.pop_back();
    }
    return normal;
}

// The helper's one line on stderr, without its prefix.
std::string reason_of(std::string output) {
    while (!output.empty() && output.back() == '\n') {
        output.pop_back();
    }
    if (const std::string prefix = "kpool-sandbox workdir: "; output.starts_with(prefix)) {
        output.erase(0, prefix.size());
    }
    return output;
}

} // namespace

kernel_workdir::kernel_workdir(launcher* launcher, std::string helper, protocol::sandbox_spec spec)
    : m_launcher(launcher), m_helper(std::move(helper)), m_spec(std::move(spec)) {}

void kernel_workdir::open(int pid, const std::string& cwd, done_fn done) {
    const std::string wanted = normal_path(cwd);
    if (wanted == m_bound) {
        done(ok_status());
        return;
    }
    if (!m_bound.empty() || m_done) {
        done(error{errc::bad_request,
                   "a sandboxed kernel's working directory is chosen once: this one works in " +
                       protocol::echo_safe(m_bound.empty() ? std::string("another") : m_bound)});
        return;
    }
    if (m_launcher == nullptr || pid <= 0) {
        done(error{errc::internal, "the kernel cannot take a working directory now"});
        return;
    }
    launch_spec helper;
    helper.argv = {m_helper, "workdir", std::to_string(pid), protocol::format(m_spec), wanted};
    helper.cwd = "/";
    m_done = std::move(done);
    m_output.clear();
    launch_callbacks callbacks;
    callbacks.on_output = [this](std::string_view bytes) {
        if (m_output.size() < kept_output) {
            m_output.append(bytes);
        }
    };
    callbacks.on_exit = [this, wanted](exit_status st) {
        auto finished = std::exchange(m_done, nullptr);
        if (st.code == 0 && st.term_signal == 0) {
            m_bound = wanted;
            finished(ok_status());
            return;
        }
        const std::string why = reason_of(m_output);
        const errc code =
            st.code == protocol::unusable_workdir_exit ? errc::bad_request : errc::internal;
        finished(error{code, why.empty() ? "kpool-sandbox workdir: " + st.describe() : why});
    };
    auto launched = m_launcher->launch(helper, std::move(callbacks));
    if (!launched) {
        std::exchange(m_done, nullptr)(launched.err());
        return;
    }
    m_running = std::move(*launched);
}

void kernel_workdir::kernel_gone(const error& why) {
    if (auto done = std::exchange(m_done, nullptr)) {
        m_running.reset(); // killed: its exit is reported to nobody
        done(why);
    }
}

} // namespace kpool::daemon
