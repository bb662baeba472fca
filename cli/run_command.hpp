// `kpool run`: papermill's command line over runner/notebook_runner. One notebook
// (`kpool run INPUT OUTPUT [options]`) or many (`kpool run IN... --output-dir DIR -j N`, one
// summary line each on stdout, then the total). Options may come before or after the paths.
#pragma once

#include "client/daemon_set.hpp"

#include <string>
#include <vector>

namespace kpool::cli {

// `args` are the words after "run"; the control endpoint and keys were parsed already.
// `daemon_named`: the endpoint came from --endpoint or $KPOOL_ENDPOINT (no local fallback).
// `url`: through that kpool serve instead (cli/remote_run.hpp).
int run_command(const std::string& endpoint, const client::curve_keys& keys,
                const std::vector<std::string>& args, bool daemon_named = false,
                const std::string& url = "");

inline constexpr const char* run_usage =
    R"(usage: kpool run INPUT OUTPUT [options]      (INPUT or OUTPUT may be -; both may be left
                                              out when a notebook is piped in or out)
       kpool run INPUT... --output-dir DIR [-j N] [options]
papermill's options, with papermill's meaning:
  -p, --parameters NAME VALUE   parameter, typed as papermill does (True, False, None, int, float)
  -r, --parameters_raw NAME VALUE   parameter, as a raw string
  -y, --parameters_yaml YAML    parameters as YAML text
  -f, --parameters_file FILE    parameters from a YAML file
  -b, --parameters_base64 B64   parameters as base64-encoded YAML
                                (merged: injected paths, -b, -f, -y, -p, -r; later ones win)
  --inject-input-path, --inject-output-path, --inject-paths
                                PAPERMILL_INPUT_PATH / PAPERMILL_OUTPUT_PATH as parameters
  -k, --kernel NAME             the pool whose kernelspec is NAME (default: the notebook's)
  -l, --language LANG           the parameters' language (default: the notebook's)
  --cwd DIR                     the kernel's working directory (default: this one)
  --prepare-only/--prepare-execute   write the parameterized notebook without running it
                                (needs no kpoold)
  --start-timeout, --start_timeout S   how long to wait for a warm kernel (default 60)
  --execution-timeout S         per cell: interrupt the kernel and stop after S seconds
  --report-mode/--no-report-mode     hide the inputs of code cells
  --log-output/--no-log-output  cell outputs and "Executing Cell N" banners on stderr
  --progress-bar/--no-progress-bar   a progress line on stderr (a terminal's only)
  --stdout-file FILE, --stderr-file FILE   the cells' stdout / stderr streams, also here
  --request-save-on-cell-execute/--no-request-save-on-cell-execute
                                write OUTPUT after every cell (default) or only at the end
  --autosave-cell-every S       during a long cell, write OUTPUT every S seconds (default 30; 0 off)
  --log-level LEVEL             DEBUG, INFO (default), WARNING, ERROR, CRITICAL
  --engine nbclient             papermill's default engine, the only one
  --help-notebook               the parameters the notebook's parameters cell defines
  --version
kpool's own:
  --pool P                      the pool to take the kernel from
  --env NAME=VALUE              environment variable in the kernel, on top of this process's
  --allow-errors                run on after a cell raises
  --cells-ahead N               the next cells wait at the kernel while one runs, N requests at
                                most, where the kernel stops at an error by itself (ipykernel);
                                the notebook is the same (default 4; 1: one at a time)
  --output-dir DIR, -j N        many notebooks, N at a time, a summary line each, then the total
Through a kpool serve (--url URL, or $KPOOL_URL; the notebook is sent in the request, the same
OUTPUT written here; -j is the most in flight, fewer while the server queues them; the kernel
gets --cwd and --env, not this process's environment or directory; --start-timeout is how long
a notebook that got no kernel (429, no connection) is sent again):
)"
    R"(  --token-file FILE, --cacert FILE, --http2   as for kpool feed (kpool feed --help)
With no pool for the notebook's kernelspec, or no kpoold at the default endpoint, the kernelspec
is started here for the run (cold, as papermill would); a daemon named by --endpoint or
$KPOOL_ENDPOINT that does not answer is exit 3 instead.
Exit status: 0 ok, 1 a cell raised (OUTPUT still written), 2 bad input, 3 kpoold unreachable,
1 and "Aborted!" on Ctrl-C (130 with --output-dir), 138 the kernel died.
)";

} // namespace kpool::cli
