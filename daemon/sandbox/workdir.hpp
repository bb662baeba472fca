// workdir: an acquire's cwd made a warm sandboxed kernel's working directory, writable, alone
// (`kpool-sandbox workdir PID SPEC_JSON CWD`).
//
// A sandboxed kernel is warm before anyone knows where it will work, so at first none of its
// pool's roots is visible: each root's path inside is an empty directory, and the root itself is
// kept at staging_dir/INDEX (root_fs.cpp), where the kernel cannot go. When a client's cwd (or a
// /v1/run notebook's folder) reaches the kernel, kpoold runs this before the kernel changes into
// it: it joins the sandbox's user namespace (when it has one) and mount namespace through the
// outer process PID, and binds that directory of the staged root at CWD's own path, with what lies
// below it. On the root itself it goes directly; below it, on a fresh read-only tmpfs over the
// root that holds only the directories on the way. So a request writes its own folder, and
// neither sees nor writes another request's beside it.
//
// Each step goes through file descriptors resolved without following a symbolic link: nothing a
// kernel or an earlier request left in a root (a link to /etc, say) can move the mount.
#pragma once

#include "protocol/sandbox_spec.hpp"

#include <string>

namespace kpool::sandbox {

// The exit status: 0, protocol::unusable_workdir_exit, or 125 (the sandbox could not be
// changed); why on stderr.
int run_workdir(int outer_pid, const protocol::sandbox_spec& spec, const std::string& cwd);

} // namespace kpool::sandbox
