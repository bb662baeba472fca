// The process-wide stop flag behind catch_stop_signals.
#include "cli/stop_signals.hpp"

#include <csignal>

namespace kpool::cli {
namespace {

volatile std::sig_atomic_t caught_signal = 0;

} // namespace

void catch_stop_signals() {
    struct sigaction action {};
    action.sa_handler = [](int signum) { caught_signal = signum; };
    sigemptyset(&action.sa_mask);
    action.sa_flags = 0; // no SA_RESTART: a poll in progress returns, and we look at the flag
    sigaction(SIGINT, &action, nullptr);
    sigaction(SIGTERM, &action, nullptr);
}

int stop_signal() { return caught_signal; }

} // namespace kpool::cli
