// Who the sandboxed processes are: the namespaces the sandbox's outer process creates, the
// cgroups it joins first, and the privileges every process inside gives up.
#pragma once

#include "protocol/result.hpp"
#include "protocol/sandbox_spec.hpp"

namespace kpool::sandbox {

// In the outer process, single-threaded: joins the spec's cgroups, then unshares the mount, pid,
// ipc (and network) namespaces, and a user namespace unless kpoold is root, whose maps it writes:
// the caller's uid and gid map to themselves (never to root inside). Its next child is pid 1.
status enter_namespaces(const protocol::sandbox_spec& spec);

// What every process inside ends with: as root, the spec's uid and gid (no supplementary
// groups); no capability in any set, bounding and ambient included; no_new_privs; dumpable (so
// that /proc/self is the process's own, as outside).
status drop_privileges(const protocol::sandbox_spec& spec);

} // namespace kpool::sandbox
