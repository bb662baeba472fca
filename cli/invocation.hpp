// One kpool command line, parsed once: the global options (anywhere on the line), the command,
// its words and its options, checked against the command table (cli/commands.hpp).
//
// Hand-written, not CLI11 or cxxopts (Debian has libcli11-dev 2.1.2), on purpose: the global
// options may come anywhere on the line and the usage text is made from the command table's rows;
// `kpool run` must take papermill's (click's) spellings and give its answers (`-p NAME VALUE`
// with two values, repeated options, paths made optional or shifted by a piped stdin, its error
// texts and exit statuses), which a general parser's grammar and messages would change; kpoold
// takes three fixed forms. Each parser is a loop of about a hundred lines with its tests, smaller
// than adapting a library to them.
#pragma once

#include "client/daemon_set.hpp"

#include <map>
#include <string>
#include <type_traits>
#include <vector>

namespace kpool::cli {

struct usage_error {
    std::string message;
    bool full_usage = false; // also print every command's usage (no or an unknown command)
};

// Options a command may take; each command's table row says which.
enum option : unsigned {
    opt_json = 1u << 0,
    opt_timeout = 1u << 1,
    opt_lease = 1u << 2,
    opt_cwd = 1u << 3,
    opt_env = 1u << 4,
    opt_pool = 1u << 5,
    opt_wide = 1u << 6,
    opt_remote = 1u << 7, // --token-file and --cacert, for --url (a kpool serve)
};

struct invocation {
    // Global: which daemons, with which keys.
    std::string endpoint;
    // --endpoint or $KPOOL_ENDPOINT said which (else `endpoint` is this user's default).
    bool endpoint_given = false;
    std::string server_key;
    std::string client_key_file;
    // A kpool serve to talk to instead of kpoold (--url, else $KPOOL_URL): feed, run, exec.
    std::string url;

    std::string command;
    std::vector<std::string> words; // after the command, options removed
    bool as_json = false;
    bool wide = false;                         // --wide: every column, however long the lines
    std::map<std::string, std::string> values; // --timeout, --lease, --cwd, --pool
    std::map<std::string, std::string> env;    // --env NAME=VALUE
    // Every word after the command but the global options, for a command that parses its own
    // (`run`, whose options are papermill's).
    std::vector<std::string> raw;

    // The daemons the global options name (a usage_error when they are wrong).
    client::daemon_set daemons() const;
    client::curve_keys keys() const;
};

struct command;

// Splits the line; nothing is checked against a command yet.
invocation parse_command_line(int argc, char** argv);
// Fills words, as_json, values and env from raw for `cmd` (unless it parses its own), or throws a
// usage_error that says what is wrong: an option it does not take, a wrong word count.
void parse_command_options(invocation& inv, const command& cmd);

template <class T>
T number(const std::string& text, const std::string& what) {
    try {
        std::size_t used = 0;
        T v{};
        if constexpr (std::is_floating_point_v<T>) {
            v = static_cast<T>(std::stod(text, &used));
        } else {
            v = static_cast<T>(std::stoll(text, &used));
        }
        if (used == text.size()) {
            return v;
        }
    } catch (const std::exception&) {
    }
    throw usage_error{what + " must be a number, not '" + text + "'"};
}

} // namespace kpool::cli
