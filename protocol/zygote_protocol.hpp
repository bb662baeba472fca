// The line protocol between kpoold and its fork servers (daemon/process/zygote.py): one JSON object
// per line each way. Pure code: requests to lines, lines to messages, bytes to lines. The zygote's
// docstring shows the same protocol from its side.
#pragma once

#include "protocol/result.hpp"
#include "protocol/sandbox_spec.hpp"

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

namespace kpool::protocol::zygote {

// kpoold -> zygote: fork one kernel.
struct fork_request {
    std::uint64_t id = 0;
    std::vector<std::string> args;                        // after `PYTHON -m ipykernel_launcher`
    std::string connection_file;                          // fills the template's {connection_file}
    std::vector<std::pair<std::string, std::string>> env; // the complete environment
    std::string cwd;                                      // empty: the zygote's
    std::string log;                                      // stdout and stderr go here
    std::vector<std::pair<int, std::uint64_t>> limits;    // setrlimit(resource, value)
    bool idle = false;                                    // start at SCHED_IDLE
    // isolation = "sandbox": the child makes this sandbox with the helper at `sandbox_helper`
    // before it becomes the kernel (daemon/process/zygote_sandbox.py).
    std::optional<sandbox_spec> sandbox;
    std::string sandbox_helper;
};
std::string format(const fork_request& request); // one line, '\n' included

// kpoold -> zygote, in its settings: what to pre-import (most used first), the most the
// zygote may grow by it, and the environment variables acquires set (a module that reads one
// at import is refused); which pages kernels pre-fault ("learn", "start" or "off": the pool's
// `prefault`); how often a running kernel reports the modules it uses (0: only as it ends).
struct preload_plan {
    std::vector<std::string> modules;
    int max_mb = 1024;
    std::vector<std::string> request_env;
    std::string prefault = "learn";
    int imports_every_s = 60;
};
std::string format(const preload_plan& plan); // JSON, no newline

// kpoold -> zygote: everything it starts with, as one JSON object, its only argument.
struct settings {
    std::string pool;         // whose zygote: its process title says so (zygote_title.py)
    std::string socket;       // where kpoold listens for it
    std::string startup_code; // the pool's: its import statements run in the zygote
    // The kernelspec's arguments after `-m ipykernel_launcher`, {connection_file} unexpanded
    // (none: the zygote pre-builds nothing).
    std::optional<std::vector<std::string>> args;
    bool prime = true; // the pool's `prime`: the priming cell run once through the pre-built shell
    preload_plan preload;
    std::vector<std::pair<std::string, std::string>> helpers; // its other files: name, source
};
std::string format(const settings& s); // JSON, no newline

// zygote -> kpoold.
struct preloaded_module { // a module the zygote pre-imported
    std::string name;
    std::string file; // its __file__ ("" for a namespace package or a built-in)
    double mtime = 0; // of `file` when it was imported: a later one means an upgrade
};
struct preload_report { // what came of the zygote's preload plan
    std::vector<preloaded_module> preloaded;
    std::vector<std::pair<std::string, std::string>> refused; // module, why
    std::vector<std::string> warmed;                          // warm-ups that ran
    std::vector<std::pair<std::string, std::string>> warm_ups_refused;
    double growth_mb = 0; // what pre-importing and warming added to the zygote
    double rss_mb = 0;    // the zygote's resident size after it
};
struct ready { // once, after the imports and pre-building
    int pid = 0;
    int threads = 0;
    bool prebuilt = false;
    std::string why_not; // why kernels are not pre-built, when they are not
    preload_report preload;
};
struct forked {
    std::uint64_t request = 0;
    int pid = 0;
    bool prebuilt = false;
    std::string why_not;
    bool at_idle = false; // the zygote forked at SCHED_IDLE (a background request)
};
struct fork_failed {
    std::uint64_t request = 0;
    std::string error;
};
struct exited {
    int pid = 0;
    std::int64_t code = 0;
    int term_signal = 0;
};
struct learned { // hot pages learned (the first kernel's start, sampled lives)
    std::uint64_t pages = 0;
    std::string why_not;       // why none will be pre-faulted, when none will
    std::uint64_t kernels = 0; // how many sampled kernels' whole lives it comes from
};
struct complaint { // a request line the zygote could not read
    std::string error;
};
struct imports { // the top-level modules a kernel used, sent as it ended
    int pid = 0;
    bool running = false;             // sent while it runs (now and then): a later one replaces it
    std::vector<std::string> modules; // installed ones
    std::vector<std::pair<std::string, std::string>> other; // the rest: module, where it was found
};
using message = std::variant<ready, forked, fork_failed, exited, learned, complaint, imports>;

// A line without its '\n'. Errors name what is wrong; the caller logs and goes on.
result<message> parse(std::string_view line);

// Splits a byte stream into lines, holding at most `max_line` bytes of an unfinished one (a
// longer line is dropped whole and counted).
class line_splitter {
public:
    explicit line_splitter(std::size_t max_line) : m_max(max_line) {}
    // Complete lines in `bytes` (with what was held before), without their '\n'.
    std::vector<std::string> feed(std::string_view bytes);
    std::uint64_t dropped() const { return m_dropped; }
    void reset() {
        m_partial.clear();
        m_skipping = false;
    }

private:
    std::size_t m_max;
    std::string m_partial;
    bool m_skipping = false; // inside a line too long to keep
    std::uint64_t m_dropped = 0;
};

} // namespace kpool::protocol::zygote
