// spawn_launcher: vfork+exec on a helper thread; output through pipes, exit through a pidfd.
//
// Lifetime: everything libuv touches lives in a heap `process_state` that outlives the C++
// handle object when needed. It is freed once its handles are closed, the spawner thread is done
// with it and its owner is gone. The child is reaped exactly once, by waitpid(pid) when its pidfd
// becomes readable, so it never lingers as a zombie.
#include "daemon/process/spawn_launcher.hpp"

#include "jupyter/executable.hpp"
#include "loop/logging.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <condition_variable>
#include <csignal>
#include <cstring>
#include <deque>
#include <mutex>
#include <sstream>
#include <vector>

namespace kpool::daemon {

namespace {

// After the process exits, how long its output pipes may stay open (held by a descendant that
// escaped the process group) before the exit is reported anyway.
constexpr std::uint64_t output_drain_ms = 200;

struct process_state final : process_record, loop::uv_handle_group<process_state> {
    uv_poll_t exit_watch; // on the pidfd: readable once the process has exited
    uv_pipe_t out;
    uv_pipe_t err;
    uv_timer_t drain_timer;
    launch_callbacks callbacks;
    exit_status status;
    std::string file; // for messages
    uv_loop_t* loop = nullptr;
    int pidfd = -1;
    int open_pipes = 2;
    bool in_flight = true; // the spawner thread holds it
    bool reported = false;

    // Its launched_process is gone and the spawner thread is done with it.
    bool releasable() const { return owner_gone && !in_flight; }

    // Called on the loop thread when the spawner thread is done with this process.
    void started(int new_pid, int new_pidfd, int spawn_errno) {
        in_flight = false;
        if (spawn_errno != 0) {
            const std::string message = "kpoold: cannot start " + file + ": " +
                                        jupyter::lowercase_first(std::strerror(spawn_errno)) + "\n";
            if (!owner_gone && callbacks.on_output) {
                callbacks.on_output(message);
            }
            exited = true;
            status = exit_status{127, 0, {}};
            report_exit(true);
            delete_if_unused();
            return;
        }
        pid = new_pid;
        pidfd = new_pidfd;
        uv_poll_init(loop, &exit_watch, pidfd);
        adopt(&exit_watch);
        uv_poll_start(&exit_watch, UV_READABLE,
                      [](uv_poll_t* h, int, int) { static_cast<process_state*>(h->data)->reap(); });
        if (!owner_gone && callbacks.on_started) {
            callbacks.on_started(pid);
        }
        process_record::started(pid);
    }

    void reap() {
        int wstatus = 0;
        const pid_t got = ::waitpid(pid, &wstatus, WNOHANG);
        if (got == 0 || (got < 0 && errno == EINTR)) {
            return; // not yet: poll again
        }
        exited = true;
        if (got == pid && WIFSIGNALED(wstatus)) {
            status = exit_status{0, WTERMSIG(wstatus), {}};
        } else if (got == pid) {
            status = exit_status{WEXITSTATUS(wstatus), 0, {}};
        } else {
            status = exit_status{-1, 0, {}}; // reaped elsewhere: a bug, but never a hang
        }
        // Sweep the kernel's process group: whatever the kernel started dies with it. The group
        // id cannot be reused while members remain, so this reaches only the kernel's own.
        ::kill(-pid, SIGKILL);
        close(&exit_watch);
        ::close(pidfd); // uv_close stopped watching it
        pidfd = -1;
        uv_timer_start(
            &drain_timer,
            [](uv_timer_t* t) { static_cast<process_state*>(t->data)->report_exit(true); },
            output_drain_ms, 0);
        report_exit(false);
    }

    // The exit is reported once the process is gone and its output read to the end (or the
    // drain time ran out), so the output tail that explains a failure is complete.
    void report_exit(bool drained_or_late) {
        if (!exited || reported || (!drained_or_late && open_pipes > 0)) {
            return;
        }
        reported = true;
        close(&out);
        close(&err);
        close(&drain_timer);
        if (!owner_gone && callbacks.on_exit) {
            try {
                callbacks.on_exit(status); // may destroy the owner: nothing of it is used after
            } catch (const std::exception& e) {
                loop::logger("kernel")->error("exit callback failed: {}", e.what());
            }
        }
    }
};

void start_reading(uv_pipe_t* pipe) {
    uv_read_start(
        reinterpret_cast<uv_stream_t*>(pipe),
        [](uv_handle_t*, size_t, uv_buf_t* buf) {
            static char buffer[8192]; // the loop is single-threaded; each read is consumed at once
            *buf = uv_buf_init(buffer, sizeof buffer);
        },
        [](uv_stream_t* stream, ssize_t n, const uv_buf_t* buf) {
            auto* self = static_cast<process_state*>(stream->data);
            if (n > 0 && !self->owner_gone && self->callbacks.on_output) {
                try {
                    self->callbacks.on_output(std::string_view(buf->base, static_cast<size_t>(n)));
                } catch (const std::exception& e) {
                    loop::logger("kernel")->error("output callback failed: {}", e.what());
                }
            } else if (n < 0) { // EOF or error: every writer closed its end
                uv_read_stop(stream);
                --self->open_pipes;
                self->report_exit(false);
            }
        });
}

class spawned_process final : public launched_process {
public:
    explicit spawned_process(process_state* state) : m_state(state) {}
    ~spawned_process() override {
        m_state->drop();
        m_state->delete_if_unused();
    }
    int pid() const override { return m_state->pid; }
    int signal_group(int signum) override { return m_state->signal_group(signum); }

private:
    process_state* m_state;
};

// One spawn, prepared on the loop thread, run on the spawner thread.
struct spawn_job {
    process_state* state;
    std::string file;
    std::vector<std::string> argv;
    std::vector<std::string> env;
    std::string cwd;
    std::vector<resource_limit> limits;
    bool idle = false;
    int out_w = -1;
    int err_w = -1;
    // results
    pid_t pid = 0;
    int pidfd = -1;
    int error = 0;
};

// Everything the child needs, prepared before vfork: between vfork and exec the child may only
// make system calls (it shares our memory and runs on our stack).
struct exec_plan {
    const char* file;
    char* const* argv;
    char* const* envp;
    const char* cwd; // nullptr: stay
    const resource_limit* limits;
    std::size_t limit_count;
    int null_fd; // /dev/null, for stdin
    int out_fd;  // stdout and stderr pipes
    int err_fd;
    int error_fd; // close-on-exec pipe: an errno written here means exec never happened
    pid_t parent;
    bool idle; // start at SCHED_IDLE (daemon/process/cpu_priority.hpp)
};

[[noreturn]] void exec_child(const exec_plan& plan) noexcept {
    int failed_errno = 0;
    // Die with the daemon: if kpoold is SIGKILLed, its kernels are killed by the kernel rather
    // than left running with nobody to hand them out. The parent may have died before this
    // line; then getppid() is no longer it.
    // A process group of its own, so kpoold signals the kernel and what it started at once; in
    // kpoold's session, not a new one: with autogroup scheduling every session is a scheduling
    // group of its own, where a SCHED_IDLE start would compete as an equal with leased kernels.
    if (::setpgid(0, 0) < 0 || ::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 ||
        ::getppid() != plan.parent) {
        failed_errno = errno != 0 ? errno : ESRCH;
    }
    if (failed_errno == 0 && plan.idle) {
        const sched_param none{};
        if (::sched_setscheduler(0, SCHED_IDLE, &none) != 0) {
            failed_errno = errno;
        }
    }
    // Default dispositions (kpoold ignores SIGPIPE; kernels must not), nothing blocked.
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    for (int sig = 1; sig < NSIG && failed_errno == 0; ++sig) {
        ::sigaction(sig, &dfl, nullptr); // fails harmlessly for SIGKILL, SIGSTOP, RT signals
    }
    sigset_t none;
    sigemptyset(&none);
    if (failed_errno == 0 && ::sigprocmask(SIG_SETMASK, &none, nullptr) != 0) {
        failed_errno = errno;
    }
    for (std::size_t i = 0; i < plan.limit_count && failed_errno == 0; ++i) {
        const rlimit limit{plan.limits[i].value, plan.limits[i].value};
        if (::setrlimit(plan.limits[i].resource, &limit) != 0) {
            failed_errno = errno;
        }
    }
    if (failed_errno == 0 &&
        (::dup2(plan.null_fd, 0) < 0 || ::dup2(plan.out_fd, 1) < 0 || ::dup2(plan.err_fd, 2) < 0 ||
         (plan.cwd != nullptr && ::chdir(plan.cwd) != 0))) {
        failed_errno = errno;
    }
    if (failed_errno == 0) {
        ::execve(plan.file, plan.argv, plan.envp);
        failed_errno = errno;
    }
    (void)!::write(plan.error_fd, &failed_errno, sizeof failed_errno);
    ::_exit(127);
}

void run_spawn(spawn_job& job) {
    std::vector<char*> argv;
    for (auto& a : job.argv) {
        argv.push_back(a.data());
    }
    argv.push_back(nullptr);
    std::vector<char*> envp;
    for (auto& e : job.env) {
        envp.push_back(e.data());
    }
    envp.push_back(nullptr);

    const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
    int error_pipe[2] = {-1, -1};
    if (null_fd < 0 || ::pipe2(error_pipe, O_CLOEXEC) != 0) {
        job.error = errno;
    } else {
        const exec_plan plan{job.file.c_str(),  argv.data(),
                             envp.data(),       job.cwd.empty() ? nullptr : job.cwd.c_str(),
                             job.limits.data(), job.limits.size(),
                             null_fd,           job.out_w,
                             job.err_w,         error_pipe[1],
                             ::getpid(),        job.idle};
        // vfork: no page-table copy, and this thread waits only until the child has exec'd.
        // This thread blocks every signal, so no handler can run in the child on our stack.
        const pid_t pid = ::vfork();
        if (pid == 0) {
            exec_child(plan);
        }
        ::close(error_pipe[1]);
        if (pid < 0) {
            job.error = errno;
        } else {
            int child_errno = 0;
            ssize_t n = 0;
            do {
                n = ::read(error_pipe[0], &child_errno, sizeof child_errno);
            } while (n < 0 && errno == EINTR);
            if (n == static_cast<ssize_t>(sizeof child_errno)) {
                job.error = child_errno;
                ::waitpid(pid, nullptr, 0); // it has _exit'ed already
            } else {
                job.pid = pid;
            }
        }
        ::close(error_pipe[0]);
    }
    if (null_fd >= 0) {
        ::close(null_fd);
    }
    ::close(job.out_w); // the child has its copies
    ::close(job.err_w);
    if (job.error != 0) {
        return;
    }
    job.pidfd = static_cast<int>(::syscall(SYS_pidfd_open, job.pid, 0));
    if (job.pidfd < 0) { // Linux before 5.3: we could not learn of its exit, so do not keep it
        job.error = errno;
        ::kill(-job.pid, SIGKILL);
        ::kill(job.pid, SIGKILL);
        ::waitpid(job.pid, nullptr, 0);
    }
}

} // namespace

struct spawn_launcher::shared {
    uv_async_t async; // wakes the loop when jobs are done
    std::mutex mutex;
    std::condition_variable wake;
    std::deque<std::unique_ptr<spawn_job>> queued;
    std::deque<std::unique_ptr<spawn_job>> done;
    bool stopping = false;
    int in_flight = 0; // loop thread only: while non-zero the async handle keeps the loop alive

    void job_queued() {
        if (in_flight++ == 0) {
            uv_ref(reinterpret_cast<uv_handle_t*>(&async));
        }
    }

    void finish_jobs() {
        std::deque<std::unique_ptr<spawn_job>> finished;
        {
            std::lock_guard lock(mutex);
            finished.swap(done);
        }
        for (auto& job : finished) {
            if (--in_flight == 0) {
                uv_unref(reinterpret_cast<uv_handle_t*>(&async));
            }
            job->state->started(job->pid, job->pidfd, job->error);
        }
    }
};

spawn_launcher::spawn_launcher(uv_loop_t* loop) : m_loop(loop) {
    auto state = std::make_unique<shared>();
    if (int rc = uv_async_init(loop, &state->async,
                               [](uv_async_t* a) { static_cast<shared*>(a->data)->finish_jobs(); });
        rc != 0) {
        throw std::runtime_error(std::string("uv_async_init: ") + uv_strerror(rc));
    }
    state->async.data = state.get();
    m_shared.reset(state.release());
    // Referenced only while a spawn is in flight; afterwards the processes keep the loop alive.
    uv_unref(reinterpret_cast<uv_handle_t*>(&m_shared->async));
    m_thread = std::thread([s = m_shared.get()] {
        // Signals go to the loop thread; and a handler must never run in a vforked child.
        sigset_t all;
        sigfillset(&all);
        ::pthread_sigmask(SIG_BLOCK, &all, nullptr);
        for (;;) {
            std::unique_ptr<spawn_job> job;
            {
                std::unique_lock lock(s->mutex);
                s->wake.wait(lock, [s] { return s->stopping || !s->queued.empty(); });
                if (s->queued.empty()) {
                    return; // stopping, and nothing left to do
                }
                job = std::move(s->queued.front());
                s->queued.pop_front();
            }
            run_spawn(*job);
            {
                std::lock_guard lock(s->mutex);
                s->done.push_back(std::move(job));
            }
            uv_async_send(&s->async);
        }
    });
}

spawn_launcher::~spawn_launcher() {
    {
        std::lock_guard lock(m_shared->mutex);
        m_shared->stopping = true;
    }
    m_shared->wake.notify_one();
    m_thread.join();
    m_shared->finish_jobs(); // their owners are gone: the processes are killed as they start
    m_shared.reset();        // closes the async handle; the state goes in its close callback
}

result<std::unique_ptr<launched_process>> spawn_launcher::launch(const launch_spec& spec,
                                                                 launch_callbacks callbacks) {
    std::string path_var;
    for (const auto& e : spec.env) {
        if (e.starts_with("PATH=")) {
            path_var = e.substr(5);
        }
    }
    auto file = jupyter::resolve_executable(spec.argv.at(0), path_var);
    if (!file) {
        return file.err();
    }
    int out[2];
    int err[2];
    if (::pipe2(out, O_CLOEXEC) != 0) {
        return error{errc::internal, std::string("cannot create a pipe: ") + std::strerror(errno)};
    }
    if (::pipe2(err, O_CLOEXEC) != 0) {
        const int e = errno;
        ::close(out[0]);
        ::close(out[1]);
        return error{errc::internal, std::string("cannot create a pipe: ") + std::strerror(e)};
    }
    auto* state = new process_state;
    state->callbacks = std::move(callbacks);
    state->file = *file;
    state->loop = m_loop;
    uv_pipe_init(m_loop, &state->out, 0);
    state->adopt(&state->out);
    uv_pipe_init(m_loop, &state->err, 0);
    state->adopt(&state->err);
    uv_timer_init(m_loop, &state->drain_timer);
    state->adopt(&state->drain_timer);
    uv_pipe_open(&state->out, out[0]);
    uv_pipe_open(&state->err, err[0]);
    start_reading(&state->out);
    start_reading(&state->err);

    auto job = std::make_unique<spawn_job>();
    job->state = state;
    job->file = std::move(*file);
    job->argv = spec.argv;
    if (spec.sandbox) {
        // The helper makes the sandbox, then runs the kernel's program (resolved above, with
        // the kernel's PATH) inside it.
        job->argv = {spec.sandbox_helper, "spawn", protocol::format(*spec.sandbox), "--",
                     job->file};
        job->argv.insert(job->argv.end(), spec.argv.begin() + 1, spec.argv.end());
        job->file = spec.sandbox_helper;
    }
    job->env = spec.env;
    job->cwd = spec.cwd;
    job->limits = spec.limits;
    job->idle = spec.idle;
    job->out_w = out[1];
    job->err_w = err[1];
    {
        std::lock_guard lock(m_shared->mutex);
        m_shared->queued.push_back(std::move(job));
    }
    m_shared->job_queued();
    m_shared->wake.notify_one();
    return std::unique_ptr<launched_process>(new spawned_process(state));
}

} // namespace kpool::daemon
