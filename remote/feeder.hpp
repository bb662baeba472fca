// The feed: jobs from a stream of JSON lines through kpool serve under the feed policy
// (remote/feed_policy.hpp), each answered exactly once as its answer comes: by the server, or
// here (a bad line, a job that could not be sent within the patience, one whose connection was
// lost mid-run, which is never sent again). `kpool feed` and remote `kpool run` are this loop.
#pragma once

#include "remote/feed_policy.hpp"
#include "remote/feed_stats.hpp"
#include "remote/http_client.hpp"
#include "remote/serve_job.hpp"

#include <functional>
#include <istream>
#include <memory>
#include <string>
#include <vector>

namespace kpool::remote {

struct feed_settings {
    client_settings client;
    policy_settings policy;
    double patience_s = 120; // how long a job may be retried (429, no connection) before it fails
    bool progress = false;   // a progress line on stderr, rewritten in place (a terminal's)
    std::size_t total = 0;   // the jobs to come, when known (for the progress line)
    // Asked between steps: true stops the feed as a refused token does (nothing more is sent,
    // what waits is answered `not_sent`), and the requests in flight finish.
    std::function<bool()> cancelled;
};

struct feed_result {
    feed_stats stats;
    std::size_t window = 0; // the policy's at the end
    double seconds = 0;
    std::string stopped_why; // no request could get through (a refused token...), or cancelled
    bool cancelled = false;
};

// Reads `input` (one job per line; blank lines skipped) on a thread of its own, so jobs go as
// lines arrive, and calls `answered` on this thread for every job. The reader shares the stream:
// one left blocked on a pipe after an early stop keeps it.
feed_result feed(std::shared_ptr<std::istream> input, const feed_settings& settings,
                 const std::function<void(const job_answer&)>& answered);
// The same for jobs made already (remote `kpool run`).
feed_result feed(std::vector<serve_job> jobs, const feed_settings& settings,
                 const std::function<void(const job_answer&)>& answered);

} // namespace kpool::remote
