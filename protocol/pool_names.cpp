// resolve_pool_name: a pool's own name first, then the pools of that kernelspec, warmest first.
#include "protocol/pool_names.hpp"

namespace kpool::protocol {

std::optional<std::string> resolve_pool_name(std::string_view wanted,
                                             const std::vector<pool_summary>& pools) {
    const pool_summary* best = nullptr;
    for (const pool_summary& p : pools) {
        if (p.name == wanted) {
            return p.name;
        }
        if (p.kernelspec == wanted && (best == nullptr || p.warm > best->warm ||
                                       (p.warm == best->warm && p.name < best->name))) {
            best = &p;
        }
    }
    return best != nullptr ? std::optional<std::string>(best->name) : std::nullopt;
}

} // namespace kpool::protocol
