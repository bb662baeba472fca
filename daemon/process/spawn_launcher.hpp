// Launches kernels with vfork+exec from a helper thread, so the event loop never waits on one.
//
// uv_spawn forks on the loop thread and then blocks it until the child has reached exec(). On a
// 2-core VM under refill load that took 12 ms at the median and 34 ms at worst (fork alone:
// 1.5 ms median, 30 ms worst), measured inside kpoold; every request queued behind it, and warm
// acquires at concurrency 50 went from ~5 ms to ~100 ms. Here a spawner thread does the
// vfork (no page-table copy) and the loop only hears back through uv_async. The child sets
// PR_SET_PDEATHSIG, which posix_spawn cannot, so kernels die with the daemon even when it is
// SIGKILLed. The death signal is tied to the thread that forked, which lives as long as the
// launcher; and the launcher outlives every kernel except on abnormal exits, where killing them
// is the point.
// Exits are learned through a pidfd (Linux 5.3+) polled by the loop, then reaped with
// waitpid(pid). SIGCHLD is left alone: nothing here calls waitpid(-1).
#pragma once

#include "daemon/process/launcher.hpp"
#include "loop/uv_handle.hpp"

#include <uv.h>

#include <memory>
#include <thread>

namespace kpool::daemon {

class spawn_launcher final : public launcher {
public:
    explicit spawn_launcher(uv_loop_t* loop);
    ~spawn_launcher() override; // joins the spawner thread
    spawn_launcher(const spawn_launcher&) = delete;
    spawn_launcher& operator=(const spawn_launcher&) = delete;

    result<std::unique_ptr<launched_process>> launch(const launch_spec& spec,
                                                     launch_callbacks callbacks) override;

    struct shared; // the job queue between the loop and the spawner thread

private:
    uv_loop_t* m_loop;
    loop::uv_ptr<shared> m_shared; // the uv_async handle first: freed when it has closed
    std::thread m_thread;
};

} // namespace kpool::daemon
