// launcher: what both launchers share about a process (exit text, pending signals, kill-on-drop).
#include "daemon/process/launcher.hpp"

#include <signal.h>

#include <cerrno>
#include <cstring>

namespace kpool::daemon {

std::string exit_status::describe() const {
    if (!reason.empty()) {
        return reason;
    }
    if (term_signal != 0) {
        return "killed by signal " + std::to_string(term_signal) + " (" + strsignal(term_signal) +
               ")";
    }
    return "exit code " + std::to_string(code);
}

namespace {

// To the process group the kernel leads; a child forked a moment ago may not lead one yet (the
// zygote's child calls setpgid itself, first thing): then to the child alone, which has no
// children of its own yet either.
int kill_group(int pid, int signum) {
    if (::kill(-pid, signum) == 0) {
        return 0;
    }
    if (errno == ESRCH && ::kill(pid, signum) == 0) {
        return 0;
    }
    return -errno;
}

} // namespace

int process_record::signal_group(int signum) {
    if (exited) {
        return -ESRCH;
    }
    if (pid == 0) { // never kill(-0, ...): that is our own process group
        pending_signal = signum;
        return 0;
    }
    return kill_group(pid, signum);
}

void process_record::started(int new_pid) {
    pid = new_pid;
    if (owner_gone) {
        pending_signal = SIGKILL; // nobody wants it any more
    }
    if (pending_signal != 0) {
        kill_group(pid, pending_signal);
    }
}

void process_record::drop() {
    if (pid != 0 && !exited) {
        kill_group(pid, SIGKILL);
    }
    owner_gone = true;
}

} // namespace kpool::daemon
