// The environment a kernel starts with: one rule for a spawned kernel, the zygote that forks
// kernels, and what `kpool status` shows of it.
#pragma once

#include "jupyter/kernelspec.hpp"

#include <string>
#include <vector>

namespace kpool::daemon {

// The environment a kernel of `spec` starts with: the daemon's, the kernelspec's env on top,
// JPY_PARENT_PID and KPOOL_INSTANCE=`instance`, as "NAME=value" entries.
std::vector<std::string> kernel_environment(const jupyter::kernelspec& spec,
                                            const std::string& instance);

} // namespace kpool::daemon
