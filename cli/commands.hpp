// The kpool commands, one table (cli/main.cpp): name, usage line, summary, word count, options,
// handler. The full usage text is made from the rows: a new command is one row and its handler
// (control ops in control_commands.cpp).
#pragma once

#include "cli/invocation.hpp"

#include <span>

namespace kpool::cli {

struct command {
    const char* name;
    const char* usage;     // after "kpool "
    const char* summary;   // what it does, for the full usage (lines split by \n)
    std::size_t min_words; // positional words after the command
    std::size_t max_words;
    unsigned options; // of `option`
    bool own_parser;  // the handler reads inv.raw and checks it itself
    int (*run)(const invocation& inv);
};

std::span<const command> commands();

// The handlers.
int ping_command(const invocation& inv);
int status_command(const invocation& inv);
int kernelspecs_command(const invocation& inv);
int acquire_command(const invocation& inv);
int release_command(const invocation& inv);
int signal_command(const invocation& inv);
int poll_command(const invocation& inv);
int resize_command(const invocation& inv);
int drain_command(const invocation& inv);
int keygen_command(const invocation& inv);
int exec_command_line(const invocation& inv);
int run_command_line(const invocation& inv);
int serve_command_line(const invocation& inv);
int feed_command_line(const invocation& inv);

} // namespace kpool::cli
