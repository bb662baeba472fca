// A running kernel that code can be executed in, whoever started it: a kernel leased from
// kpoold (client::leased_kernel) or one started for a single run (runner::local_kernel). The
// notebook runner needs no more than this.
#pragma once

#include "jupyter/kernel_client.hpp"

#include <nlohmann/json.hpp>

#include <functional>
#include <string>

namespace kpool::jupyter {

class kernel_handle {
public:
    virtual ~kernel_handle() = default;
    virtual kernel_client& client() = 0;
    // The kernel_info_reply's content, from when it proved ready.
    virtual const nlohmann::json& kernel_info() const = 0;
    virtual const std::string& id() const = 0;
    // Hooks for execute(): alive, interrupt, and `cancelled` (the caller gives up).
    virtual execute_hooks hooks(std::function<bool()> cancelled) = 0;
    // Why the kernel died, when it did and someone said ("out of memory (limit 512 MiB)").
    virtual std::string death_reason() const { return {}; }
};

} // namespace kpool::jupyter
