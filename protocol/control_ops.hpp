// The control protocol's ops as data: each op's name and the fields it takes, with their kinds
// and limits (PROTOCOL.md describes the same table in prose). Requests are checked against this
// table before anything reads them, so a field's rules live in exactly one row.
#pragma once

#include "protocol/result.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace kpool::protocol {

enum class field_kind {
    name,    // a non-empty string (a pool or a kernel id)
    integer, // an integer from min to max
    seconds, // a number above 0 and at most max_lease_s
    path,    // an absolute path; null counts as absent
    env,     // an object of NAME (no '=') -> string; null counts as absent
    history, // "memory" or "file"
};

struct field_spec {
    std::string_view name;
    field_kind kind;
    bool required = false;
    std::int64_t min = 0;                 // integer only
    std::int64_t max = 0;                 // integer only
    std::string_view what = "an integer"; // integer only: how its error names the value
};

struct op_spec {
    std::string_view name;
    std::vector<field_spec> fields; // besides "op" and "req_id", which every request may carry
};

// Every op, in the order the unknown-op error lists them.
const std::vector<op_spec>& control_ops();
// nullptr for an op the protocol does not have.
const op_spec* find_control_op(std::string_view name);

// bad_request for a field the op does not take, a required field missing, or a value outside
// its field's rules; the first problem in table order is the one reported.
status check_fields(const op_spec& op, const nlohmann::json& body);
// One field's value, by the rules of `spec` (for front ends that take the same field in their
// own requests, e.g. kpool serve's cwd and env).
status check_field(const field_spec& spec, const nlohmann::json& value);

// The field rules shared by several ops.
inline constexpr field_spec cwd_field{"cwd", field_kind::path};
inline constexpr field_spec env_field{"env", field_kind::env};

// A checked env value (or null) as a map.
std::map<std::string, std::string> env_of(const nlohmann::json& value);

} // namespace kpool::protocol
