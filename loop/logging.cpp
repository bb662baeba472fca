// One stderr sink (journald adds timestamps; we keep ours for plain terminals) for all loggers.
#include "loop/logging.hpp"

#include <spdlog/sinks/stdout_sinks.h>

namespace kpool::loop {

std::shared_ptr<spdlog::logger> logger(const std::string& name) {
    if (auto existing = spdlog::get(name)) {
        return existing;
    }
    static auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
    auto log = std::make_shared<spdlog::logger>(name, sink);
    log->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%-5l%$ %n: %v");
    log->set_level(spdlog::get_level());
    spdlog::register_logger(log);
    return log;
}

void set_log_level(const std::string& level) {
    const auto lvl = spdlog::level::from_str(level);
    spdlog::set_level(lvl); // applies to every registered logger
}

} // namespace kpool::loop
