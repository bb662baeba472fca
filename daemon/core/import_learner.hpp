// What a forked pool's zygote should pre-import (issue #35): learned from the top-level modules
// its recent kernels used, each reported by the kernel as it ends and, while it runs, now and
// then (daemon/process/zygote.py): a long-lived kernel (a notebook server's, a gateway's) is
// learned from while it lives, and counts once however often it reports.
// A module used by at least half of the last `window` kernels (once `min_kernels` have
// reported) is wanted; one already pre-imported stays wanted (once it is in the zygote, kernels
// no longer show that they use it, nor the libraries it brought in: forgetting on what they
// show would rebuild the zygote back and forth). Modules the zygote refused (not installed, a
// thread at import, ...) are remembered with why and never wanted again; those refused only for
// the size cap are tried again with the next build. To forget, delete the state file.
// Pure: the daemon feeds it reports and zygote outcomes and persists state() (import_state.hpp).
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <set>
#include <string>
#include <vector>

namespace kpool::daemon {

class import_learner {
public:
    struct settings {
        std::size_t window = 20;     // the kernels whose reports count
        std::size_t min_kernels = 3; // reports before anything is learned
        double learn_share = 0.5;    // of the window: a module used this often is wanted
    };

    import_learner() = default;
    explicit import_learner(settings s) : m_settings(s) {}

    // One kernel's report: the installed modules it used, and the others with where they were.
    // `kernel` names it (its pid; 0: a kernel that reports once); `running`: a report while it
    // runs, which its next report replaces in the window (its last, as it ends, closes it).
    void kernel_used(const std::vector<std::string>& modules,
                     const std::vector<std::pair<std::string, std::string>>& other,
                     std::uint64_t kernel = 0, bool running = false);

    // The modules to pre-import, most used first (ties by name): what the zygote should have.
    std::vector<std::string> wanted() const;

    // A zygote was built: what it pre-imported and what it refused (and why).
    void built(const std::vector<std::string>& preloaded,
               const std::vector<std::pair<std::string, std::string>>& refused);

    const std::vector<std::string>& preloaded() const { return m_preloaded; }
    const std::map<std::string, std::string>& refused() const { return m_refused; }
    std::size_t reports() const { return m_reports; }

    // For status: learned, candidates (used, not wanted yet, with how many of the window used
    // them), refused with why, modules kernels used that are not installed (with where).
    nlohmann::json describe() const;

    // What survives a restart: the pre-imported modules (so the first zygote has them) and the
    // refusals. from_state ignores what it cannot read.
    nlohmann::json state() const;
    void from_state(const nlohmann::json& state);

    // A refusal that depends on what else the zygote holds, not on the module.
    static bool refused_for_size(const std::string& why);

private:
    std::map<std::string, std::size_t> counts() const; // over the window

    settings m_settings;
    struct report {
        std::uint64_t kernel = 0;
        bool running = false; // its kernel's next report replaces it
        std::set<std::string> modules;
    };
    std::deque<report> m_window;
    std::size_t m_reports = 0; // kernels reported, ever
    std::vector<std::string> m_preloaded;
    std::map<std::string, std::string> m_refused;
    std::map<std::string, std::string> m_not_installed; // name -> where, the latest seen
};

} // namespace kpool::daemon
