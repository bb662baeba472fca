// import_learner: counting the window's reports, deciding what to pre-import, remembering refusals.
#include "daemon/core/import_learner.hpp"

#include <algorithm>
#include <cmath>

namespace kpool::daemon {

using json = nlohmann::json;

namespace {

constexpr std::size_t max_not_installed = 64; // remembered for status
constexpr const char* size_cap_refusal = "over the zygote's size cap";

} // namespace

bool import_learner::refused_for_size(const std::string& why) {
    return why.starts_with(size_cap_refusal);
}

void import_learner::kernel_used(const std::vector<std::string>& modules,
                                 const std::vector<std::pair<std::string, std::string>>& other,
                                 std::uint64_t kernel, bool running) {
    const auto earlier = std::find_if(m_window.begin(), m_window.end(), [&](const report& r) {
        return kernel != 0 && r.running && r.kernel == kernel;
    });
    if (earlier != m_window.end()) {
        earlier->modules = {modules.begin(), modules.end()}; // its latest view, in its place
        earlier->running = running;
    } else {
        m_window.push_back({kernel, running, {modules.begin(), modules.end()}});
        while (m_window.size() > m_settings.window) {
            m_window.pop_front();
        }
        ++m_reports;
    }
    for (const auto& [name, where] : other) {
        if (m_not_installed.size() < max_not_installed || m_not_installed.contains(name)) {
            m_not_installed[name] = where;
        }
    }
}

std::map<std::string, std::size_t> import_learner::counts() const {
    std::map<std::string, std::size_t> out;
    for (const report& used : m_window) {
        for (const std::string& name : used.modules) {
            ++out[name];
        }
    }
    return out;
}

std::vector<std::string> import_learner::wanted() const {
    const auto used = counts();
    const double n = static_cast<double>(m_window.size());
    std::vector<std::pair<std::size_t, std::string>> chosen;
    const auto count_of = [&](const std::string& name) {
        const auto it = used.find(name);
        return it == used.end() ? std::size_t{0} : it->second;
    };
    // What was learned stays: once a module is pre-imported, kernels no longer show they use it
    // (it is in the zygote before them; only names in their namespace do, and the libraries it
    // brought in never). Forgetting on what they show would rebuild the zygote back and forth.
    const bool judged = m_window.size() >= m_settings.min_kernels;
    for (const std::string& name : m_preloaded) {
        if (!m_refused.contains(name)) {
            chosen.emplace_back(count_of(name), name);
        }
    }
    if (judged) {
        for (const auto& [name, count] : used) {
            const bool already =
                std::find(m_preloaded.begin(), m_preloaded.end(), name) != m_preloaded.end();
            if (!already && !m_refused.contains(name) &&
                static_cast<double>(count) >= std::ceil(m_settings.learn_share * n)) {
                chosen.emplace_back(count, name);
            }
        }
    }
    std::sort(chosen.begin(), chosen.end(), [](const auto& a, const auto& b) {
        return a.first != b.first ? a.first > b.first : a.second < b.second;
    });
    std::vector<std::string> out;
    for (auto& [count, name] : chosen) {
        out.push_back(std::move(name));
    }
    return out;
}

void import_learner::built(const std::vector<std::string>& preloaded,
                           const std::vector<std::pair<std::string, std::string>>& refused) {
    m_preloaded = preloaded;
    std::erase_if(m_refused, [](const auto& r) { return refused_for_size(r.second); });
    for (const auto& [name, why] : refused) {
        m_refused[name] = why;
    }
}

json import_learner::describe() const {
    const auto used = counts();
    json candidates = json::object();
    const auto wanted_now = wanted();
    for (const auto& [name, count] : used) {
        const bool listed =
            std::find(m_preloaded.begin(), m_preloaded.end(), name) != m_preloaded.end() ||
            std::find(wanted_now.begin(), wanted_now.end(), name) != wanted_now.end();
        if (!listed && !m_refused.contains(name)) {
            candidates[name] = count;
        }
    }
    json refused = json::object();
    for (const auto& [name, why] : m_refused) {
        refused[name] = why;
    }
    json not_installed = json::object();
    for (const auto& [name, where] : m_not_installed) {
        not_installed[name] = where;
    }
    return {{"learned", m_preloaded},         {"wanted", wanted_now},
            {"candidates", candidates},       {"refused", refused},
            {"not_installed", not_installed}, {"kernels_reported", m_reports},
            {"window", m_window.size()}};
}

json import_learner::state() const {
    json refused = json::object();
    for (const auto& [name, why] : m_refused) {
        if (!refused_for_size(why)) {
            refused[name] = why;
        }
    }
    return {{"learned", m_preloaded}, {"refused", refused}};
}

void import_learner::from_state(const json& state) {
    if (!state.is_object()) {
        return;
    }
    m_preloaded.clear();
    if (const auto it = state.find("learned"); it != state.end() && it->is_array()) {
        for (const json& name : *it) {
            if (name.is_string() && !name.get_ref<const std::string&>().empty()) {
                m_preloaded.push_back(name.get<std::string>());
            }
        }
    }
    if (const auto it = state.find("refused"); it != state.end() && it->is_object()) {
        for (const auto& [name, why] : it->items()) {
            if (why.is_string()) {
                m_refused[name] = why.get<std::string>();
            }
        }
    }
}

} // namespace kpool::daemon
