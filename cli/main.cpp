// kpool: the command-line client of kpoold (control protocol v1, protocol/PROTOCOL.md): the
// command table and main(). Exit statuses: cli/exit_status.hpp.
#include "cli/commands.hpp"
#include "cli/exit_status.hpp"
#include "kpool/version.hpp"

#include <algorithm>
#include <cstdio>
#include <string>
#include <string_view>

namespace kpool::cli {
namespace {

constexpr const char* usage_head = "usage: kpool [--endpoint E] [--server-key K --client-key-file "
                                   "F] [--url URL] COMMAND [ARGS]\n\n";

constexpr const char* usage_tail = R"usage(
Durations (T) take a unit, the same for every command: 500ms, 5s, 1.5m, 2h. A bare number
keeps its old meaning: milliseconds for acquire --timeout, seconds everywhere else.
POOL names a kernel: a pool of that name, else a pool that serves that kernelspec.

The endpoint defaults to $KPOOL_ENDPOINT, else kpoold's default for this user. Several daemons:
a comma-separated list, or dns:NAME:PORT (every address of NAME). Then acquire (and exec, run)
asks the daemon most likely to have a warm kernel and fails over to the next; release, signal
and poll find the daemon that owns the kernel; ping, status, resize and drain address every
daemon (status: one table, with a HOST column).
A tcp:// endpoint needs CURVE: the daemon's public key (--server-key, $KPOOL_SERVER_KEY) and
this client's secret key file (--client-key-file, $KPOOL_CLIENT_KEY_FILE).
--url URL (or $KPOOL_URL) names a kpool serve instead, for feed, run and exec.
Exit status: 0 ok, 1 kpoold answered with an error, 2 bad usage, 3 kpoold unreachable.
)usage";

constexpr command command_table[] = {
    {"ping", "ping", "is kpoold there? (version, protocol)", 0, 0, opt_json, false, ping_command},
    {"status", "status [--wide] [--json]", "pools, counters and kernels (--wide: every column)", 0,
     0, opt_json | opt_wide, false, status_command},
    {"kernelspecs", "kernelspecs [--json]", "the kernelspecs kpoold can start", 0, 0, opt_json,
     false, kernelspecs_command},
    {"acquire", "acquire POOL [--timeout T] [--lease T] [--cwd DIR] [--env NAME=VALUE]... [--json]",
     "take a warm kernel; prints its connection file, e.g.\n"
     "jupyter console --existing \"$(kpool acquire python3)\"",
     1, 1, opt_json | opt_timeout | opt_lease | opt_cwd | opt_env, false, acquire_command},
    {"release", "release KERNEL_ID|CONNECTION_FILE", "shut an acquired kernel down", 1, 1, opt_json,
     false, release_command},
    {"signal", "signal KERNEL_ID SIGNAL", "send a signal (INT, TERM, KILL, ... or a number)", 2, 2,
     opt_json, false, signal_command},
    {"poll", "poll KERNEL_ID [--json]", "is an acquired kernel still running?", 1, 1, opt_json,
     false, poll_command},
    {"resize", "resize POOL SIZE", "keep SIZE warm kernels in POOL from now on (until a reload)", 2,
     2, opt_json, false, resize_command},
    {"drain", "drain POOL", "stop POOL's idle kernels and refuse acquires until a resize", 1, 1,
     opt_json, false, drain_command},
    {"keygen", "keygen SECRET_KEY_FILE",
     "make a CURVE key pair: writes the secret key (mode 0600)\n"
     "and prints the public key",
     1, 1, 0, false, keygen_command},
    {"run", "run INPUT OUTPUT [-p NAME VALUE]... [options]",
     "run a notebook, parameterized as papermill does\n(kpool run --help lists the options)", 0, 0,
     0, true, run_command_line},
    {"exec", "exec [--pool P] [--cwd DIR] [--env NAME=VALUE]... [--timeout T] [--json] [--] CODE|-",
     "run CODE (or stdin) in a warm kernel of pool P (default\n"
     "python3): its output here, the kernel released afterwards;\n"
     "exit 1 if it raised, 130 interrupted, 138 the kernel died,\n"
     "N for Python's sys.exit(N); with --url (and --token-file F,\n"
     "--cacert F), through a kpool serve",
     1, 1, opt_json | opt_timeout | opt_cwd | opt_env | opt_pool | opt_remote, false,
     exec_command_line},
    {"serve", "serve [--listen HOST:PORT] [options]",
     "an HTTP front door: each request on a fresh warm kernel\n(kpool serve --help lists the "
     "endpoints and options)",
     0, 0, 0, true, serve_command_line},
    {"feed", "feed [FILE.jsonl|-] --url URL [options]",
     "jobs (JSON lines) through a kpool serve, as many at once\nas it takes; an answer line each "
     "(kpool feed --help)",
     0, 0, 0, true, feed_command_line},
};

// The whole usage: each row's usage and what it does, the description in a column of its own
// (on the next line when the usage is longer than the first column).
std::string usage_text() {
    constexpr std::size_t column = 32;
    std::string text = usage_head;
    for (const command& c : command_table) {
        std::string line = std::string("  ") + c.usage;
        if (line.size() + 1 >= column) {
            text += line + "\n";
            line.clear();
        }
        std::string_view what = c.summary;
        while (!what.empty()) {
            const std::size_t end = std::min(what.find('\n'), what.size());
            line.resize(column, ' ');
            text += line + std::string(what.substr(0, end)) + "\n";
            line.clear();
            what.remove_prefix(std::min(end + 1, what.size()));
        }
    }
    return text + usage_tail;
}

const command* find_command(const std::string& name) {
    for (const command& c : command_table) {
        if (name == c.name) {
            return &c;
        }
    }
    return nullptr;
}

int run(int argc, char** argv) {
    invocation inv = parse_command_line(argc, argv);
    const command* cmd = find_command(inv.command);
    if (cmd == nullptr || !cmd->own_parser) {
        // Help and version are global only for the commands that do not parse their own words.
        for (const std::string& w : inv.raw) {
            if (w == "-h" || w == "--help") {
                std::fputs(usage_text().c_str(), stdout);
                return exit_status::ok;
            }
            if (w == "--version") {
                std::printf("kpool %s (control protocol %d)\n", kpool::version,
                            kpool::control_protocol_version);
                return exit_status::ok;
            }
        }
    }
    if (inv.command.empty()) {
        throw usage_error{"no command given", true};
    }
    if (cmd == nullptr) {
        throw usage_error{"unknown command '" + inv.command + "'", true};
    }
    try {
        parse_command_options(inv, *cmd);
        return cmd->run(inv);
    } catch (usage_error& e) {
        if (e.message.find("usage: kpool") == std::string::npos) {
            e.message += std::string("\nusage: kpool ") + cmd->usage;
        }
        throw;
    }
}

} // namespace

std::span<const command> commands() { return command_table; }

} // namespace kpool::cli

int main(int argc, char** argv) {
    try {
        return kpool::cli::run(argc, argv);
    } catch (const kpool::cli::usage_error& e) {
        std::fprintf(stderr, "kpool: %s\n", e.message.c_str());
        if (e.full_usage) {
            std::fprintf(stderr, "\n%s", kpool::cli::usage_text().c_str());
        }
        return kpool::cli::exit_status::usage;
    }
}
