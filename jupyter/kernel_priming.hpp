// What a kernel is asked to run before it counts as warm, so that a user's first cell costs what
// the second does. A fresh kernel's first execute pays for lazy set-up (IPython builds its
// display formatters and compiles its input transformers on the first cell, IRkernel's first
// two executes cost 80-120 ms against 15 ms later); kpoold pays that at background priority
// instead, while nobody waits.
//
// Every request leaves no trace a user can see (tests/integration/test_priming.py compares a
// primed kernel's first cells with a cold kernel's): store_history false, so no history entry
// and no execution count. Python's is silent (a loud cell would also fire IPython's
// pre_run_cell/post_run_cell hooks) and formats a user expression to exercise the display path
// without an execute_result; R's are loud, since IRkernel's silent executes skip the output
// handlers that cost the time. Loud requests publish on iopub before any client can subscribe.
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>
#include <vector>

namespace kpool::jupyter {

// The execute_request contents to send, in order, to a kernel of `language` (the kernelspec's
// language, any case): python (ipykernel, xeus-python) and R (IRkernel). Other languages get
// none: octave_kernel's first execute costs what its later ones do, and for the rest there was
// no kernel to measure against (startup_code can prime them).
std::vector<nlohmann::json> priming_requests(std::string_view language);

} // namespace kpool::jupyter
