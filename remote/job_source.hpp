// Where a feed's jobs come from: lines of JSON read from a stream on a thread of their own (a
// pipe may be slow to give them), or jobs made already (remote `kpool run`). The feed asks for
// the next one without ever waiting.
#pragma once

#include "remote/serve_job.hpp"

#include <functional>
#include <istream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kpool::remote {

// A line to read into a job (`text`), or a job made already.
struct source_item {
    std::size_t line = 0;
    std::string text;
    std::optional<serve_job> job;
};

class job_source {
public:
    virtual ~job_source() = default;
    // The next job if one is ready now (never waits).
    virtual std::optional<source_item> next() = 0;
    // None is left, nor will come.
    virtual bool finished() const = 0;
};

// `wake` is called from the reader's thread when a line is ready or the stream ended. The reader
// shares the stream: one left blocked on a pipe when the source goes keeps it, and the process
// ends soon after.
std::unique_ptr<job_source> read_lines(std::shared_ptr<std::istream> in,
                                       std::function<void()> wake);
std::unique_ptr<job_source> made_jobs(std::vector<serve_job> jobs);

} // namespace kpool::remote
