// What one kernel's sandbox is made of (daemon/sandbox/): namespaces, the filesystem it sees,
// the identity it runs as, the cgroups it joins. kpoold builds it per kernel and hands it, as
// one JSON object, to the kpool-sandbox helper (spawned kernels: on its command line) or to the
// zygote (forked kernels: in the fork request), which passes it on to the same helper. Pure
// code: the struct and its JSON both ways.
#pragma once

#include "protocol/result.hpp"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kpool::protocol {

struct sandbox_spec {
    // kpoold is not root: a user namespace of its own maps the kernel's uid and gid to kpoold's
    // (never to root inside). kpoold is root: no user namespace; the kernel becomes `uid`/`gid`.
    bool user_namespace = true;
    unsigned uid = 0;
    unsigned gid = 0;
    // false: a network namespace of its own, with only its own loopback.
    bool network = true;
    // Bound at their own paths, read-only or writable; a path that does not exist is skipped,
    // a symbolic link is copied as a link (Debian's /lib -> usr/lib).
    std::vector<std::string> readable;
    std::vector<std::string> writable;
    // Where each kernel's working directory may lie. None of it is visible at first: a root's
    // path is an empty directory, and the acquire's cwd under it is bound there writable, alone
    // (`kpool-sandbox workdir`, daemon/sandbox/workdir.hpp). Each root is kept for that at
    // staging_dir/INDEX, a directory nothing but a privileged process may enter.
    std::vector<std::string> roots;
    // Single files bound writable at their own paths: the kernel's connection file (ipykernel
    // writes it back when its view of the connection differs from the file's).
    std::vector<std::string> files;
    // Empty private directories (tmpfs), gone with the kernel: /tmp, /var/tmp, /dev/shm, HOME.
    std::vector<std::string> private_dirs;
    // Paths under a bound one that stay hidden (an empty read-only tmpfs over each): kpool's
    // config, runtime and state directories.
    std::vector<std::string> hidden;
    // Where the kernel starts (inside a private or writable directory).
    std::string cwd;
    // cgroup.procs files the sandbox's first process writes itself into, before anything else
    // starts: every process of the kernel is then in the kernel's cgroups.
    std::vector<std::string> cgroup_procs;
    // RLIMIT_NPROC inside the kernel's own user namespace (0: none): its tasks, threads included.
    std::uint64_t processes = 0;
};

// Where the sandbox keeps its roots (see `roots`): mode 0000 on a read-only root.
inline constexpr const char* staging_dir = "/.kpool-roots";
// `kpool-sandbox workdir`'s exit status when the cwd cannot be a working directory (outside the
// roots, missing, a link on the way): the client's mistake, not the sandbox's. 125: the sandbox's.
inline constexpr int unusable_workdir_exit = 3;

std::string format(const sandbox_spec& spec); // JSON, no newline
result<sandbox_spec> parse_sandbox_spec(std::string_view json_text);

} // namespace kpool::protocol
