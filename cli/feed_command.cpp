// kpool feed: JSON lines of jobs through a kpool serve (remote/feeder.hpp), an answer line each
// on stdout, the statistics on stderr at the end.
#include "cli/commands.hpp"
#include "cli/exit_status.hpp"
#include "cli/remote_options.hpp"
#include "cli/stop_signals.hpp"
#include "protocol/python_json.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>

namespace kpool::cli {
namespace {

constexpr const char* feed_usage_head =
    R"usage(usage: kpool feed [FILE.jsonl | -] --url URL [options]
Runs every job of FILE (one JSON object a line; - or none: stdin) through a kpool serve, each on
a fresh kernel, as many at once as the server takes without queueing them:
  {"id": 1, "code": "print(6 * 7)"}                                  POST /v1/exec
  {"id": 2, "notebook": "in.ipynb", "parameters": {"a": 1}, "output": "out.ipynb"}
                                      the local notebook, sent in the request (POST /v1/run)
  {"id": 3, "root_notebook": "reports/x.ipynb", "parameters": {...}}
                                      a notebook under the server's --root (POST /v1/run/PATH)
  and "kernel", "timeout", "cwd", "env" as kpool serve takes them. A notebook job without
  "output" answers with its cells' outputs.
Each job's answer is a JSON line on stdout as it comes (id, line, status, outcome, ms, attempts,
and result, output or error), in any order, every job exactly once. A job that got 429, a 503
before a kernel was taken, or no connection is sent again (after its Retry-After); one whose
connection was lost while it ran is reported, never sent twice. At the end, on stderr, one JSON
object of statistics; a progress line while it runs on a terminal.
Options:
)usage";

constexpr const char* feed_usage_tail =
    R"(  --progress, --no-progress     the progress line (default: when stderr is a terminal)
Ctrl-C: nothing more is sent, the jobs in flight finish (a second Ctrl-C ends them at once).
Exit status: 0 every job ok, 1 some failed (or their code raised, or the token was refused:
then nothing more is sent), 2 bad usage, 130 interrupted.
)";

std::size_t count_lines(const std::string& path) {
    std::ifstream in(path);
    std::size_t n = 0;
    std::string line;
    while (std::getline(in, line)) {
        n += line.find_first_not_of(" \t\r") != std::string::npos ? 1 : 0;
    }
    return n;
}

} // namespace

int feed_command_line(const invocation& inv) {
    remote::feed_settings settings;
    settings.policy.max_in_flight = 64;
    std::string token_file;
    std::string input = "-";
    bool input_given = false;
    std::optional<bool> progress;
    const std::vector<std::string>& args = inv.raw;
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string& a = args[i];
        if (a == "-h" || a == "--help") {
            std::printf("%s%s%s", feed_usage_head, remote_options_usage, feed_usage_tail);
            return exit_status::ok;
        }
        if (take_remote_option(args, i, settings, token_file)) {
            continue;
        }
        if (a == "--progress" || a == "--no-progress") {
            progress = a == "--progress";
        } else if (a.size() > 1 && a[0] == '-') {
            throw usage_error{"unknown option " + a};
        } else if (input_given) {
            throw usage_error{"kpool feed takes one FILE (or - for stdin)"};
        } else {
            input = a;
            input_given = true;
        }
    }
    if (inv.url.empty()) {
        throw usage_error{"kpool feed needs the kpool serve's address: --url URL (or $KPOOL_URL)"};
    }
    resolve_remote(inv.url, token_file, settings);
    std::shared_ptr<std::istream> in;
    if (input == "-") {
        in = std::shared_ptr<std::istream>(&std::cin, [](std::istream*) {});
        struct stat st {};
        if (::fstat(STDIN_FILENO, &st) == 0 && S_ISREG(st.st_mode)) { // `< jobs.jsonl`: countable
            settings.total = count_lines("/proc/self/fd/0"); // (its own offset, not stdin's)
        }
    } else {
        auto file = std::make_shared<std::ifstream>(input);
        if (!*file) {
            throw usage_error{"cannot read " + input};
        }
        in = file;
        settings.total = count_lines(input);
    }
    settings.progress = progress.value_or(::isatty(STDERR_FILENO) != 0);
    // Ctrl-C (or SIGTERM): nothing more is sent and the jobs in flight finish, each answered; a
    // second one ends the process at once (the server then interrupts their kernels).
    catch_stop_signals();
    settings.cancelled = [] {
        if (!stop_requested()) {
            return false;
        }
        std::signal(SIGINT, SIG_DFL);
        std::signal(SIGTERM, SIG_DFL);
        return true;
    };
    const remote::feed_result done = remote::feed(in, settings, [](const remote::job_answer& a) {
        const std::string line = protocol::to_json_text(a.line) + "\n";
        std::fwrite(line.data(), 1, line.size(), stdout);
        std::fflush(stdout);
    });
    if (!done.stopped_why.empty()) {
        std::fprintf(stderr, "kpool feed: %s; stopped\n", done.stopped_why.c_str());
    }
    std::fprintf(stderr, "%s\n",
                 protocol::to_json_text(done.stats.summary(done.seconds, done.window)).c_str());
    if (done.cancelled) {
        return exit_status::interrupted;
    }
    const bool all_ok = done.stats.ok == done.stats.jobs && done.stopped_why.empty();
    return all_ok ? exit_status::ok : exit_status::failed;
}

} // namespace kpool::cli
