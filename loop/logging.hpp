// Named spdlog loggers ("daemon", "pool", "kernel", "control", ...) sharing one stderr sink.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace kpool::loop {

// The logger of that name, created on first use with the current level.
std::shared_ptr<spdlog::logger> logger(const std::string& name);

// Sets the level of every kpool logger, now and later; `level` is a config log_level value.
void set_log_level(const std::string& level);

} // namespace kpool::loop
