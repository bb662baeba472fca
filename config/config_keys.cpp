// config_keys.hpp's questions, answered by the sections' rows (section_readers.hpp).
#include "config/config_keys.hpp"

#include "config/section_readers.hpp"

namespace kpool::config {

std::optional<std::string_view>
changed_daemon_key(const daemon_config& now, const daemon_config& next, reload_effect effect) {
    return detail::daemon_key_changed(now, next, effect);
}

std::optional<std::string_view> changed_pool_key(const pool_config& now, const pool_config& next,
                                                 reload_effect effect) {
    return detail::pool_key_changed(now, next, effect);
}

std::vector<section_keys> all_keys() {
    std::vector<section_keys> out;
    for (auto&& sections :
         {detail::daemon_sections(), detail::pool_sections(), detail::serve_sections()}) {
        out.insert(out.end(), sections.begin(), sections.end());
    }
    return out;
}

} // namespace kpool::config
