// launcher: what both launchers share about a process (exit text, pending signals, kill-on-drop).
#include "daemon/process/launcher.hpp"

#include <signal.h>

#include <cerrno>
#include <cstring>

namespace kpool::daemon {

std::string exit_status::describe() const {
    if (term_signal != 0) {
        return "killed by signal " + std::to_string(term_signal) + " (" + strsignal(term_signal) + ")";
    }
    return "exit code " + std::to_string(code);
}

int process_record::signal_group(int signum) {
    if (exited) {
        return -ESRCH;
    }
    if (pid == 0) { // never kill(-0, ...): that is our own process group
        pending_signal = signum;
        return 0;
    }
    return ::kill(-pid, signum) == 0 ? 0 : -errno;
}

void process_record::started(int new_pid) {
    pid = new_pid;
    if (owner_gone) {
        pending_signal = SIGKILL; // nobody wants it any more
    }
    if (pending_signal != 0) {
        ::kill(-pid, pending_signal);
    }
}

void process_record::drop() {
    if (pid != 0 && !exited) {
        ::kill(-pid, SIGKILL);
    }
    owner_gone = true;
}

} // namespace kpool::daemon
