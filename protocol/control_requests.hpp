// Control requests as clients send them: one typed builder per op, so kpool serve, the client
// library and the CLI never spell an op or a field by hand. Each builds what the matching
// parse_* in control.hpp reads back (tests/test_control_messages.cpp checks the round trip).
#pragma once

#include "protocol/control.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string_view>

namespace kpool::protocol::requests {

nlohmann::json ping();
nlohmann::json status();
nlohmann::json kernelspecs();
// Only the fields that are set: the daemon's defaults apply to the rest.
nlohmann::json acquire(const acquire_args& args);
nlohmann::json release(std::string_view kernel_id);
nlohmann::json poll(std::string_view kernel_id);
nlohmann::json renew(std::string_view kernel_id, double lease_s);
nlohmann::json signal(std::string_view kernel_id, int signum);
nlohmann::json context(const context_args& args);
nlohmann::json resize(std::string_view pool, std::int64_t size); // checked by kpoold
nlohmann::json drain(std::string_view pool);

// The op a request built here (or any request object) names; "" when it names none.
std::string_view op_of(const nlohmann::json& request);

} // namespace kpool::protocol::requests
