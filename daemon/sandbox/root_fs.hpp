// The filesystem a sandboxed kernel sees: an allow-list, not a block-list. Built by the
// sandbox's first process inside the new mount (and pid) namespace, before the kernel runs a line
// of its own: an empty tmpfs as the root, the spec's readable paths bound read-only (with every
// mount beneath them), its writable ones read-write, its roots kept out of sight for the working
// directory an acquire names (workdir.hpp), private empty tmpfs directories (/tmp, HOME, ...), a
// minimal /dev (with pseudo-terminals of its own), a /proc of the new pid namespace, the kernel's
// connection file, kpool's own directories hidden, and the host's root detached: nothing else
// is reachable.
#pragma once

#include "protocol/result.hpp"
#include "protocol/sandbox_spec.hpp"

namespace kpool::sandbox {

// Needs CAP_SYS_ADMIN over the current mount namespace, which must not be the host's.
status build_root(const protocol::sandbox_spec& spec);

} // namespace kpool::sandbox
