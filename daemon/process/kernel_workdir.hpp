// kernel_workdir: a sandboxed kernel's working directory, bound into its sandbox by
// `kpool-sandbox workdir` (daemon/sandbox/workdir.hpp) before the kernel changes into it. Once
// per kernel: a request's folder is all of its pool's roots it sees, and code that ran in the
// kernel never gets another (the same folder again is nothing to do).
#pragma once

#include "daemon/process/launcher.hpp"
#include "protocol/result.hpp"
#include "protocol/sandbox_spec.hpp"

#include <functional>
#include <memory>
#include <string>

namespace kpool::daemon {

class kernel_workdir {
public:
    using done_fn = std::function<void(const status&)>;

    // `helper`: the kpool-sandbox program, run by `launcher` (a spawn launcher); `spec`: the
    // kernel's sandbox (its roots, whether it has a user namespace).
    kernel_workdir(launcher* launcher, std::string helper, protocol::sandbox_spec spec);

    // `cwd` bound in the sandbox of the kernel whose outer process is `pid`; `done` once:
    // bad_request for a cwd the helper refused or a second one, internal when it failed.
    void open(int pid, const std::string& cwd, done_fn done);
    // The kernel is gone: an open in progress is answered `why`, its helper killed.
    void kernel_gone(const error& why);

private:
    launcher* m_launcher;
    std::string m_helper;
    protocol::sandbox_spec m_spec;
    std::string m_bound;                         // the cwd bound, once it is
    std::unique_ptr<launched_process> m_running; // the helper, while it runs
    std::string m_output;                        // its stderr: why it failed
    done_fn m_done;                              // open's caller, while the helper runs
};

} // namespace kpool::daemon
