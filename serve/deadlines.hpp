// How long kpool serve waits for kpoold and for a kernel, the same for a /v1 call and for a
// gateway kernel (when a kernel it holds counts as gone: serve/kernel_leases.hpp).
#pragma once

#include <chrono>

namespace kpool::serve {

// Added to what a control request asks kpoold to wait for: kpoold's own deadline answers first.
inline constexpr std::chrono::milliseconds control_margin{5000};
// For a leased kernel's channels to connect and answer (its iopub subscription proven).
inline constexpr std::chrono::milliseconds kernel_ready_timeout{10000};

} // namespace kpool::serve
