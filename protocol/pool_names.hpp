// The one rule by which every client names a kernel (kpool run's -k and --pool, kpool exec's
// --pool, kpool serve's "kernel" and ?kernel=, the gateway's kernelspec names, the provisioner,
// an acquire's "pool"): a pool of that name, else a pool that serves the kernelspec of that
// name, the one with the most warm kernels first (then by name). So a pool named `py` serving
// kernelspec `python3` is reached by a notebook that names python3, and two pools of one
// kernelspec with different settings stay addressable by their own names.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kpool::protocol {

// A pool as status reports it: the part clients steer by (protocol/control_replies reads it).
struct pool_summary {
    std::string name;
    std::string kernelspec;
    int warm = 0;
    int size = 0;
    int starting = 0;
    int leased = 0;
    bool failing = false;
    bool drained = false;
    bool removed = false;
    std::string language{};                     // its kernelspec's, when the daemon knows it
    std::optional<double> time_to_warm_s_p50{}; // recent; none before a kernel got warm
    bool sandboxed{};                           // isolation = "sandbox" (docs/security.md)
};

// The pool `wanted` names among `pools` (those that can serve: not removed), if any.
std::optional<std::string> resolve_pool_name(std::string_view wanted,
                                             const std::vector<pool_summary>& pools);

} // namespace kpool::protocol
