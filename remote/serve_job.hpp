// One job for kpool serve, as a line of `kpool feed`'s input says it, and its answer as a line of
// its output (docs/feed.md has both forms):
//   {"id": ..., "code": "..."}                                        POST /v1/exec
//   {"id": ..., "notebook": "local.ipynb", "parameters": {...},
//    "output": "out.ipynb"}                                           POST /v1/run (the file sent)
//   {"id": ..., "root_notebook": "reports/x.ipynb", ...}              POST /v1/run/{path}
//   (--root's)
// each with `kernel`, `timeout`, `cwd`, `env` as kpool serve takes them.
#pragma once

#include "protocol/result.hpp"
#include "remote/http_client.hpp"

#include <nlohmann/json.hpp>

#include <map>
#include <optional>
#include <string>

namespace kpool::remote {

struct serve_job {
    nlohmann::json id; // the caller's, echoed (null when the line had none)
    std::size_t line = 0;
    std::string notebook; // a local notebook, read and sent in the body
    std::string output;   // where the executed notebook goes (a run job's)
    http_request request; // what is sent, built once
    bool is_run() const { return request.target.starts_with("/v1/run"); }
};

// A notebook job made here rather than read from a line (remote `kpool run`): the notebook's
// text as read, its parameters in order, what the kernel gets. `output` "-": stdout.
struct notebook_job {
    nlohmann::json id;
    std::size_t line = 0;
    std::string input; // for papermill's input_path
    std::string output;
    std::string notebook_text;
    nlohmann::ordered_json parameters = nlohmann::ordered_json::object();
    std::string kernel;
    std::optional<double> timeout_s; // per cell
    std::string cwd;
    std::map<std::string, std::string> env;
    bool report_mode = false;
};
result<serve_job> make_notebook_job(const notebook_job& spec);

// Reads one input line into a job: its request built (a local notebook read), or an error that
// says what is wrong with the line. `line` is its number, from 1.
result<serve_job> read_job(const std::string& text, std::size_t line);

// The answer to a job: one JSON line for stdout (docs/feed.md). A run job's executed notebook is
// written to its `output` here (with papermill's input and output paths set to the local files).
// `attempts`: how many requests it took.
struct job_answer {
    nlohmann::ordered_json line; // id first, then what happened
    bool ok = false;             // answered 200 and its code did not raise
    nlohmann::json notebook;     // a run job's executed notebook, when one came back (else null)
};
job_answer answer_of(const serve_job& job, const http_answer& answer, unsigned attempts);
// A job that got no answer: `error` a short code, `message` what happened.
job_answer unanswered(const serve_job& job, const std::string& error, const std::string& message,
                      unsigned attempts);
// A line that is no job.
job_answer bad_line(std::size_t line, const std::string& message);

} // namespace kpool::remote
