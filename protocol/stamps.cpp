// Random UUIDs and ISO 8601 UTC times, as Jupyter writes them.
#include "protocol/stamps.hpp"

#include "protocol/hmac.hpp"

#include <cstdio>
#include <ctime>

namespace kpool::protocol {

std::string random_uuid() {
    std::string hex = random_hex(16);
    hex[12] = '4';                                                   // version 4
    hex[16] = "89ab"[std::stoi(hex.substr(16, 1), nullptr, 16) & 3]; // RFC 4122 variant
    return hex.substr(0, 8) + "-" + hex.substr(8, 4) + "-" + hex.substr(12, 4) + "-" +
           hex.substr(16, 4) + "-" + hex.substr(20);
}

std::string iso8601_utc(std::chrono::system_clock::time_point t) {
    const auto micros =
        std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
    const std::time_t seconds = static_cast<std::time_t>(micros / 1000000);
    std::tm tm{};
    gmtime_r(&seconds, &tm);
    char text[48];
    const std::size_t n = std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%S", &tm);
    std::snprintf(text + n, sizeof text - n, ".%06lldZ", static_cast<long long>(micros % 1000000));
    return text;
}

std::string iso8601_now() { return iso8601_utc(std::chrono::system_clock::now()); }

} // namespace kpool::protocol
