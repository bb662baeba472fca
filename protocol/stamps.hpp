// What Jupyter's messages and models are stamped with: random UUIDs (kernel, session and
// message ids) and ISO 8601 UTC times with microseconds (header dates, last_activity).
#pragma once

#include <chrono>
#include <string>

namespace kpool::protocol {

// A fresh random UUID, version 4 (RFC 4122), lower-case: the shape of jupyter_server's ids.
std::string random_uuid();

// `t` as "%Y-%m-%dT%H:%M:%S.%fZ", as Jupyter writes header dates and jupyter_server its times.
std::string iso8601_utc(std::chrono::system_clock::time_point t);
std::string iso8601_now();

} // namespace kpool::protocol
