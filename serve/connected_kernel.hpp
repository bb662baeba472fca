// A kernel a kpoold handed out to kpool serve (which daemon, its id there, how to reach it), and
// the same kernel with our sockets to it connected and its iopub subscription proven: what a
// spare is, and what the Kernel Gateway API builds a kernel of.
#pragma once

#include "protocol/connection_info.hpp"
#include "serve/kernel_channels.hpp"

#include <cstddef>
#include <memory>
#include <string>

namespace kpool::serve {

struct kernel_lease {
    std::size_t daemon = 0;
    std::string kernel_id;
    protocol::connection_info connection;
};

struct connected_kernel {
    kernel_lease lease;
    std::unique_ptr<kernel_channels> channels; // all four ports
};

} // namespace kpool::serve
