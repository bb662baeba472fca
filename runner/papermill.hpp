// What papermill does to a notebook besides running it, as pure functions on the in-memory
// notebook: the injected parameters cell, `metadata.papermill` on the notebook and on every cell
// (times, durations, status, exception), nbclient's `metadata.execution` timestamps, and the two
// marker cells an error leaves (the banner at the top, the anchor before the failing cell).
#pragma once

#include "params/values.hpp"
#include "protocol/result.hpp"

#include <nlohmann/json.hpp>

#include <chrono>
#include <string>
#include <vector>

namespace kpool::runner {

using json = nlohmann::json;
using wall_clock = std::chrono::system_clock;

inline constexpr const char* error_marker_tag = "papermill-error-cell-tag";

// Python's datetime.utcnow().isoformat(): "2026-11-30T05:35:08.123456" (no fraction when the
// microseconds are 0, no zone), as papermill writes its times.
std::string papermill_time(wall_clock::time_point t);

// nbclient's timestamp(msg): the message header's date as "%Y-%m-%dT%H:%M:%S.%fZ", or now.
std::string message_time(const json& header);

// papermill's nb_kernel_name: `override_name` if given, else metadata.kernelspec.name, else "".
std::string nb_kernel_name(const json& nb, const std::string& override_name);
// papermill's nb_language: `override_language` if given, else metadata.kernelspec.language,
// else metadata.language_info.name, else `fallback`.
std::string nb_language(const json& nb, const std::string& override_language,
                        const std::string& fallback);

// Whether `cell` carries `tag` in metadata.tags.
bool has_tag(const json& cell, const std::string& tag);

// The first cell carrying `tag` in metadata.tags, or -1.
long first_tagged_cell(const json& nb, const std::string& tag);

// papermill's parameterize_notebook: a code cell tagged injected-parameters holding `source`,
// replacing an earlier injected one, else right after the first cell tagged parameters, else at
// the top (`warnings` then says so). nbformat 4.5 notebooks give the new cell an id.
void inject_parameters(json& nb, const std::string& source, std::vector<std::string>& warnings);

// papermill's load_notebook_node: a 4.x notebook upgraded to 4.5 (cell ids), metadata.papermill
// created when missing (default_parameters, parameters, environment_variables, version), and
// every cell given tags ([]) and metadata.papermill ({}) when it has none.
void load_notebook(json& nb, const std::string& version);

// metadata.papermill before a run: input and output paths, version, and the parameters and
// environment variables (the --env ones) when there are any (else what was recorded stays).
void prepare_metadata(json& nb, const std::string& input_path, const std::string& output_path,
                      const nlohmann::ordered_json& parameters, const json& environment,
                      const std::string& version);

// papermill's notebook_start: run times reset, every cell pending, code cells without outputs
// or execution counts.
void notebook_start(json& nb, wall_clock::time_point now);
void cell_start(json& cell, wall_clock::time_point now);
void cell_exception(json& nb, json& cell);
void cell_complete(json& cell, wall_clock::time_point now);
// papermill's notebook_complete: end time, duration, pending cells before a failure completed.
void notebook_complete(json& nb, wall_clock::time_point start, wall_clock::time_point now);

// The banner at the top and the anchor before cell `failed_cell` (both markdown, tagged
// papermill-error-cell-tag); `execution_count` is the failed cell's, as papermill shows it.
void insert_error_cells(json& nb, std::size_t failed_cell, const json& execution_count);

// papermill's remove_error_markers: the cells an earlier failed run left (tagged
// papermill-error-cell-tag) go, so a re-run that succeeds shows no stale banner.
void remove_error_markers(json& nb);

// papermill's report mode: every code cell's input hidden (metadata.jupyter replaced by
// {"source_hidden": true}, as papermill replaces it).
void hide_inputs(json& nb);

// A random 8-hex-digit cell id, as nbformat makes them.
std::string new_cell_id();

} // namespace kpool::runner
