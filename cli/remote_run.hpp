// `kpool run --url`: the same command through a kpool serve (POST /v1/run with the notebook in
// the body): the same OUTPUT (papermill's metadata, its paths the local ones), the same messages
// and exit statuses; many notebooks (--output-dir) go under the feed policy, -j its cap.
#pragma once

#include "cli/run_args.hpp"

namespace kpool::cli {

// `r` read, its parameters merged (one notebook), r.remote resolved.
int run_remote(const parsed_run& r);

} // namespace kpool::cli
