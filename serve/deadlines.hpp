// How long kpool serve waits for kpoold and for a kernel, the same for a /v1 call and for a
// gateway kernel; and when a kernel it holds counts as gone.
#pragma once

#include "protocol/result.hpp"

#include <nlohmann/json.hpp>

#include <chrono>

namespace kpool::serve {

// Added to what a control request asks kpoold to wait for: kpoold's own deadline answers first.
inline constexpr std::chrono::milliseconds control_margin{5000};
// For a leased kernel's channels to connect and answer (its iopub subscription proven).
inline constexpr std::chrono::milliseconds kernel_ready_timeout{10000};

// kpoold's reply to a poll of a kernel held (a gateway kernel, a spare): whether it is gone, as
// kpoold says (exited, or no longer known), or because `unanswered_polls` (kept by the caller)
// reached three in a row: kernels die with their daemon.
inline bool poll_says_gone(const result<nlohmann::json>& reply, int& unanswered_polls) {
    unanswered_polls = reply ? 0 : unanswered_polls + 1;
    return (reply && (!reply->value("ok", false) || !reply->value("alive", true))) || unanswered_polls >= 3;
}

} // namespace kpool::serve
