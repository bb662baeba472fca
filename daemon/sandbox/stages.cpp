// stages: outer, init and kernel, the three processes of a sandboxed kernel (stages.hpp).
#include "daemon/sandbox/stages.hpp"

#include "daemon/sandbox/identity.hpp"
#include "daemon/sandbox/root_fs.hpp"
#include "daemon/sandbox/sys_status.hpp"
#include "daemon/sandbox/syscall_filter.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

namespace kpool::sandbox {
namespace {

[[noreturn]] void fail(const std::string& what) {
    std::fprintf(stderr, "kpool-sandbox: %s\n", what.c_str());
    std::fflush(stderr);
    ::_exit(sandbox_failed);
}

// SIGKILL when the outer process dies; if it already has, its pipe reads as closed.
void die_with_outer(int life_fd) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL, 0UL, 0UL, 0UL);
    pollfd p{life_fd, POLLIN, 0};
    if (::poll(&p, 1, 0) != 0) {
        ::_exit(sandbox_failed);
    }
}

bool write_all(int fd, const void* data, std::size_t size) {
    const char* at = static_cast<const char*>(data);
    while (size > 0) {
        const ssize_t n = ::write(fd, at, size);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return false;
        }
        at += n;
        size -= static_cast<std::size_t>(n);
    }
    return true;
}

std::string read_all(int fd) {
    std::string out;
    char buf[4096];
    for (;;) {
        const ssize_t n = ::read(fd, buf, sizeof buf);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n <= 0) {
            return out;
        }
        out.append(buf, static_cast<std::size_t>(n));
    }
}

void report(int ready_fd, const std::string& line) {
    write_all(ready_fd, line.data(), line.size());
    ::close(ready_fd);
}

// The kernel's side in a spawned sandbox: init's answer, then its own privileges and filter.
void become_kernel(const protocol::sandbox_spec& spec, int ready_fd, int life_fd) {
    die_with_outer(life_fd);
    const std::string answer = read_all(ready_fd);
    ::close(ready_fd);
    const auto newline = answer.find('\n');
    if (!answer.starts_with("ok ") || newline == std::string::npos) {
        fail(answer.starts_with("error ") ? answer.substr(6, newline - 6)
                                          : "init ended before the sandbox was ready");
    }
    const std::vector<std::uint8_t> program(
        answer.begin() + static_cast<std::ptrdiff_t>(newline) + 1, answer.end());
    if (::chdir(spec.cwd.empty() ? "/" : spec.cwd.c_str()) != 0) {
        fail("chdir " + spec.cwd + ": " + std::strerror(errno));
    }
    if (auto st = drop_privileges(spec); !st) {
        fail(st.err().message);
    }
    die_with_outer(life_fd); // a change of uid disarmed it
    if (auto st = install_filter(program); !st) {
        fail(st.err().message);
    }
}

} // namespace

void run_init(const protocol::sandbox_spec& spec, int go_fd, int ready_fd, int life_fd) {
    die_with_outer(life_fd);
    char go = 0;
    while (::read(go_fd, &go, 1) < 0 && errno == EINTR) {
    }
    ::close(go_fd);
    if (go != 'g') {
        fail("the outer process ended before the kernel's process existed");
    }
    sigset_t child;
    sigemptyset(&child);
    sigaddset(&child, SIGCHLD);
    sigprocmask(SIG_BLOCK, &child, nullptr);
    if (auto st = build_root(spec); !st) {
        report(ready_fd, "error " + st.err().message + "\n");
        fail(st.err().message);
    }
    auto program = filter_program();
    if (!program) {
        report(ready_fd, "error " + program.err().message + "\n");
        fail(program.err().message);
    }
    const std::string head = "ok " + std::to_string(program->size()) + "\n";
    if (!write_all(ready_fd, head.data(), head.size()) ||
        !write_all(ready_fd, program->data(), program->size())) {
        fail("the kernel is gone");
    }
    ::close(ready_fd);
    if (auto st = drop_privileges(spec); !st) {
        fail(st.err().message);
    }
    die_with_outer(life_fd);
    // Only reaping from here on: orphans of the kernel's processes are ours (we are pid 1).
    for (;;) {
        int sig = 0;
        sigwait(&child, &sig);
        while (::waitpid(-1, nullptr, WNOHANG) > 0) {
        }
    }
}

void run_outer(int kernel_pid, int init_pid) {
    // Signals for the kernel reach it through its process group; we only wait.
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE}) {
        ::signal(sig, SIG_IGN);
    }
    int status = 0;
    while (::waitpid(kernel_pid, &status, 0) < 0) {
        if (errno != EINTR) {
            status = sandbox_failed << 8;
            break;
        }
    }
    // The kernel is gone: init's death ends whatever it left running inside.
    ::kill(init_pid, SIGKILL);
    while (::waitpid(init_pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        ::signal(sig, SIG_DFL);
        sigset_t just;
        sigemptyset(&just);
        sigaddset(&just, sig);
        sigprocmask(SIG_UNBLOCK, &just, nullptr);
        ::kill(::getpid(), sig);
    }
    ::_exit(WIFEXITED(status) ? WEXITSTATUS(status) : sandbox_failed);
}

void run_spawn(const protocol::sandbox_spec& spec, const std::vector<std::string>& argv) {
    if (auto st = enter_namespaces(spec); !st) {
        fail(st.err().message);
    }
    int ready[2];
    int life[2];
    int go[2];
    if (::pipe2(ready, O_CLOEXEC) != 0 || ::pipe2(life, O_CLOEXEC) != 0 ||
        ::pipe2(go, O_CLOEXEC) != 0) {
        fail(std::string("pipe: ") + std::strerror(errno));
    }
    const pid_t init_pid = ::fork();
    if (init_pid < 0) {
        fail(std::string("fork: ") + std::strerror(errno));
    }
    if (init_pid == 0) {
        ::close(ready[0]);
        ::close(life[1]);
        ::close(go[1]);
        run_init(spec, go[0], ready[1], life[0]);
    }
    const pid_t kernel_pid = ::fork();
    if (kernel_pid < 0) {
        ::kill(init_pid, SIGKILL);
        fail(std::string("fork: ") + std::strerror(errno));
    }
    if (kernel_pid == 0) {
        ::close(ready[1]);
        ::close(life[1]);
        ::close(go[0]);
        ::close(go[1]);
        become_kernel(spec, ready[0], life[0]);
        std::vector<char*> args;
        for (const std::string& a : argv) {
            args.push_back(const_cast<char*>(a.c_str()));
        }
        args.push_back(nullptr);
        ::execvp(args[0], args.data());
        fail("exec " + argv[0] + ": " + std::strerror(errno));
    }
    ::close(ready[0]);
    ::close(ready[1]);
    ::close(life[0]);
    ::close(go[0]);
    write_all(go[1], "g", 1); // the kernel's process exists: init may build its root
    ::close(go[1]);
    run_outer(kernel_pid, init_pid); // life[1] stays open until we exit
}

} // namespace kpool::sandbox
