// `kpool run`: papermill's command line over runner/notebook_runner. One notebook
// (`kpool run INPUT OUTPUT [options]`) or many (`kpool run IN... --output-dir DIR -j N`, one
// summary line each on stdout). Options may come before or after the paths.
#pragma once

#include "client/daemon_set.hpp"

#include <string>
#include <vector>

namespace kpool::client {

// `args` are the words after "run"; the control endpoint and keys were parsed already.
int run_run(const std::string& endpoint, const curve_keys& keys, const std::vector<std::string>& args);

inline constexpr const char* run_usage = R"(usage: kpool run INPUT OUTPUT [options]      (INPUT or OUTPUT may be -)
       kpool run INPUT... --output-dir DIR [-j N] [options]
  --pool P                 the pool to take the kernel from
  -k, --kernel NAME        the pool whose kernelspec is NAME (default: the notebook's)
  --cwd DIR                working directory in the kernel (default: INPUT's directory)
  --env NAME=VALUE         environment variable in the kernel (repeatable)
  -p NAME VALUE            parameter, typed as papermill does (True, False, None, int, float)
  -r NAME VALUE            parameter, as a raw string
  -y YAML                  parameters as YAML text
  -f FILE                  parameters from a YAML file
                           (merged: -f, then -y, then -p, then -r; later ones win)
  --prepare-only           write the parameterized notebook without running it
  --start-timeout S        how long to wait for a warm kernel (default 60)
  --execution-timeout S    per cell: interrupt the kernel and stop after S seconds
  --allow-errors           run on after a cell raises
  --log-output             stream each cell's stdout and stderr as it arrives
  --no-progress            no progress line (there is one only on a terminal anyway)
Exit status: 0 ok, 1 a cell raised (OUTPUT still written), 2 bad input, 3 kpoold unreachable,
130 interrupted, 138 the kernel died.
)";

} // namespace kpool::client
