// `kpool exec --url`: the snippet through a kpool serve (POST /v1/exec, its outputs streamed as
// NDJSON), shown as they come and ending as a local `kpool exec` ends: the same exit statuses,
// --json's output list, sys.exit(N). A 429 or a server not up yet is waited out (its
// Retry-After) within the acquire's usual patience; Ctrl-C hangs up, and kpool serve interrupts
// and releases the kernel.
#pragma once

#include "cli/exec_command.hpp"
#include "remote/feeder.hpp"

namespace kpool::cli {

// `pool_given`: --pool was said (else kpool serve's default kernel).
int exec_remote(const exec_options& options, bool pool_given,
                const remote::feed_settings& settings);

} // namespace kpool::cli
