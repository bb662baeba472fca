// spawn_launcher: uv_spawn with UV_PROCESS_DETACHED (setsid) and two output pipes.
//
// Lifetime: the libuv handles live in a heap `process_state` that outlives the C++ handle
// object when needed. It is freed only when its four handles (process, two pipes, a timer) are
// closed and the owner is gone; the process handle is closed only in its exit callback (closing
// it earlier leaves a zombie).
#include "daemon/spawn_launcher.hpp"

#include "daemon/logging.hpp"

#include <csignal>
#include <cstring>

namespace kpool::daemon {

std::string exit_status::describe() const {
    if (term_signal != 0) {
        return "killed by signal " + std::to_string(term_signal) + " (" + strsignal(term_signal) + ")";
    }
    return "exit code " + std::to_string(code);
}

namespace {

// After the process exits, how long its output pipes may stay open (held by a descendant that
// escaped the process group) before the exit is reported anyway.
constexpr std::uint64_t output_drain_ms = 200;

struct process_state {
    uv_process_t process;
    uv_pipe_t out;
    uv_pipe_t err;
    uv_timer_t drain_timer;
    launch_callbacks callbacks;
    exit_status status;
    int pid = 0;
    int open_handles = 4;
    int open_pipes = 2;
    bool exited = false;
    bool reported = false;
    bool owner_gone = false;

    void maybe_free() {
        if (open_handles == 0 && owner_gone) {
            delete this;
        }
    }
    static void closed(uv_handle_t* h) {
        auto* self = static_cast<process_state*>(h->data);
        --self->open_handles;
        self->maybe_free();
    }
    static void close_handle(void* h) {
        auto* handle = static_cast<uv_handle_t*>(h);
        if (uv_is_closing(handle) == 0) {
            uv_close(handle, closed);
        }
    }

    // The exit is reported once the process is gone and its output read to the end (or the
    // drain time ran out), so the output tail that explains a failure is complete.
    void report_exit(bool drained_or_late) {
        if (!exited || reported || (!drained_or_late && open_pipes > 0)) {
            return;
        }
        reported = true;
        close_handle(&out);
        close_handle(&err);
        close_handle(&drain_timer);
        if (!owner_gone && callbacks.on_exit) {
            try {
                callbacks.on_exit(status); // may destroy the owner: nothing of it is used after
            } catch (const std::exception& e) {
                logger("kernel")->error("exit callback failed: {}", e.what());
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
                    logger("kernel")->error("output callback failed: {}", e.what());
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
        if (!m_state->exited) {
            // The owner gave up on a live process: kill it; the exit callback still reaps it.
            uv_kill(-m_state->pid, SIGKILL);
        }
        m_state->owner_gone = true;
        m_state->maybe_free();
    }
    int pid() const override { return m_state->pid; }
    int signal_group(int signum) override {
        return m_state->exited ? -ESRCH : uv_kill(-m_state->pid, signum);
    }

private:
    process_state* m_state;
};

} // namespace

result<std::unique_ptr<launched_process>> spawn_launcher::launch(const launch_spec& spec,
                                                                 launch_callbacks callbacks) {
    auto* state = new process_state;
    state->callbacks = std::move(callbacks);
    uv_pipe_init(m_loop, &state->out, 0);
    uv_pipe_init(m_loop, &state->err, 0);
    uv_timer_init(m_loop, &state->drain_timer);
    state->process.data = state->out.data = state->err.data = state->drain_timer.data = state;

    std::vector<char*> argv;
    for (const auto& a : spec.argv) {
        argv.push_back(const_cast<char*>(a.c_str()));
    }
    argv.push_back(nullptr);
    std::vector<char*> env;
    for (const auto& e : spec.env) {
        env.push_back(const_cast<char*>(e.c_str()));
    }
    env.push_back(nullptr);

    uv_stdio_container_t stdio[3];
    stdio[0].flags = UV_IGNORE;
    stdio[1].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
    stdio[1].data.stream = reinterpret_cast<uv_stream_t*>(&state->out);
    stdio[2].flags = static_cast<uv_stdio_flags>(UV_CREATE_PIPE | UV_WRITABLE_PIPE);
    stdio[2].data.stream = reinterpret_cast<uv_stream_t*>(&state->err);

    uv_process_options_t options{};
    options.file = argv[0];
    options.args = argv.data();
    options.env = env.data();
    options.cwd = spec.cwd.empty() ? nullptr : spec.cwd.c_str();
    options.stdio = stdio;
    options.stdio_count = 3;
    // A session of its own: signals reach the kernel's whole process group, and the kernel's
    // own interrupt handler (which uses killpg only when pgid == pid) works.
    options.flags = UV_PROCESS_DETACHED;
    options.exit_cb = [](uv_process_t* proc, int64_t status, int term_signal) {
        auto* self = static_cast<process_state*>(proc->data);
        self->exited = true;
        self->status = exit_status{status, term_signal};
        // Sweep the kernel's process group: whatever the kernel started dies with it. The group
        // id cannot be reused while members remain, so this reaches only the kernel's own.
        uv_kill(-self->pid, SIGKILL);
        process_state::close_handle(proc);
        uv_timer_start(
            &self->drain_timer,
            [](uv_timer_t* t) { static_cast<process_state*>(t->data)->report_exit(true); },
            output_drain_ms, 0);
        self->report_exit(false);
    };

    if (int rc = uv_spawn(m_loop, &state->process, &options); rc != 0) {
        // uv_spawn initialised the process handle even though it failed: close everything.
        state->owner_gone = true;
        process_state::close_handle(&state->process);
        process_state::close_handle(&state->out);
        process_state::close_handle(&state->err);
        process_state::close_handle(&state->drain_timer);
        return error{errc::internal, "cannot start " + spec.argv[0] + ": " + uv_strerror(rc)};
    }
    state->pid = state->process.pid;
    start_reading(&state->out);
    start_reading(&state->err);
    return std::unique_ptr<launched_process>(new spawned_process(state));
}

} // namespace kpool::daemon
