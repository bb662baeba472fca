// The control protocol's op table and the checks it drives.
#include "protocol/control_ops.hpp"

#include "protocol/control.hpp"
#include "protocol/op_table.hpp"
#include "protocol/text.hpp"

#include <algorithm>
#include <cmath>

namespace kpool::protocol {
namespace {

using json = nlohmann::json;

error bad_field(std::string message) { return {errc::bad_request, std::move(message)}; }

constexpr field_spec kernel_id_field{"kernel_id", field_kind::name, true};
constexpr field_spec pool_field{"pool", field_kind::name, true};
constexpr field_spec history_field{"history", field_kind::history};

bool absent(const field_spec& spec, const json& value) {
    return value.is_null() && (spec.kind == field_kind::path || spec.kind == field_kind::env);
}

} // namespace

namespace ops {
// clang-format off
const op_row<no_args> ping{"ping", {}};
const op_row<acquire_args> acquire{"acquire", {
    {pool_field,                                                         &acquire_args::pool},
    {{"timeout_ms", field_kind::integer, false, 0, max_timeout_ms},      &acquire_args::timeout_ms},
    {{"lease_s", field_kind::seconds},                                   &acquire_args::lease_s},
    {cwd_field,                                                          &acquire_args::cwd},
    {env_field,                                                          &acquire_args::env},
    {history_field,                                                      &acquire_args::memory_history}}};
const op_row<kernel_args> release{"release", {{kernel_id_field, &kernel_args::kernel_id}}};
const op_row<signal_args> signal{"signal", {
    {kernel_id_field,                                                    &signal_args::kernel_id},
    {{"signum", field_kind::integer, true, 1, 64, "a signal number"},    &signal_args::signum}}};
const op_row<kernel_args> poll{"poll", {{kernel_id_field, &kernel_args::kernel_id}}};
const op_row<renew_args> renew{"renew", {
    {kernel_id_field,                                                    &renew_args::kernel_id},
    {{"lease_s", field_kind::seconds, true},                             &renew_args::lease_s}}};
const op_row<context_args> context{"context", {
    {kernel_id_field,                                                    &context_args::kernel_id},
    {cwd_field,                                                          &context_args::cwd},
    {env_field,                                                          &context_args::env},
    {history_field,                                                      &context_args::memory_history}}};
const op_row<no_args> status{"status", {}};
const op_row<no_args> kernelspecs{"kernelspecs", {}};
const op_row<pool_args> resize{"resize", {
    {pool_field,                                                         &pool_args::pool},
    {{"size", field_kind::integer, true, 0, 4096},                       &pool_args::size}}};
const op_row<pool_args> drain{"drain", {{pool_field, &pool_args::pool}}};
// clang-format on
} // namespace ops

namespace {
template <class Args>
op_spec spec_of(const op_row<Args>& row) {
    op_spec spec{row.name, {}};
    for (const bound_field<Args>& f : row.fields) {
        spec.fields.push_back(f.spec);
    }
    return spec;
}
} // namespace

const std::vector<op_spec>& control_ops() {
    static const std::vector<op_spec> specs = {
        spec_of(ops::ping),    spec_of(ops::acquire), spec_of(ops::release),
        spec_of(ops::signal),  spec_of(ops::poll),    spec_of(ops::renew),
        spec_of(ops::context), spec_of(ops::status),  spec_of(ops::kernelspecs),
        spec_of(ops::resize),  spec_of(ops::drain)};
    return specs;
}

const op_spec* find_control_op(std::string_view name) {
    const auto& ops = control_ops();
    auto it =
        std::find_if(ops.begin(), ops.end(), [&](const op_spec& o) { return o.name == name; });
    return it == ops.end() ? nullptr : &*it;
}

status check_field(const field_spec& spec, const json& value) {
    const std::string field = "field '" + std::string(spec.name) + "'";
    switch (spec.kind) {
    case field_kind::name:
        if (!value.is_string() || value.get_ref<const std::string&>().empty()) {
            return bad_field(field + " must be a non-empty string");
        }
        break;
    case field_kind::integer:
        if (!value.is_number_integer() || value.get<std::int64_t>() < spec.min ||
            value.get<std::int64_t>() > spec.max) {
            return bad_field(field + " must be " + std::string(spec.what) + " from " +
                             std::to_string(spec.min) + " to " + std::to_string(spec.max));
        }
        break;
    case field_kind::seconds:
        if (!value.is_number() || !std::isfinite(value.get<double>()) || value.get<double>() <= 0 ||
            value.get<double>() > max_lease_s) {
            return bad_field(field + " must be a number above 0 and at most 31536000");
        }
        break;
    case field_kind::path:
        if (!value.is_null() &&
            (!value.is_string() || !value.get_ref<const std::string&>().starts_with("/"))) {
            return bad_field(field + " must be an absolute path");
        }
        break;
    case field_kind::env:
        if (value.is_null()) {
            break;
        }
        if (!value.is_object()) {
            return bad_field(field + " must be an object of strings");
        }
        for (const auto& [name, v] : value.items()) {
            if (name.empty() || name.find('=') != std::string::npos || !v.is_string()) {
                return bad_field(field + ": '" + echo_safe(name) +
                                 "' must be a name without '=' with a string value");
            }
        }
        break;
    case field_kind::history:
        if (!value.is_string() || (value != "memory" && value != "file")) {
            return bad_field(field + " must be \"memory\" or \"file\"");
        }
        break;
    }
    return ok_status();
}

status check_fields(const op_spec& op, const json& body) {
    for (const auto& item : body.items()) {
        // A named copy: clang before 16 cannot capture a structured binding in a lambda.
        const std::string& key = item.key();
        if (key != "op" && key != "req_id" &&
            std::none_of(op.fields.begin(), op.fields.end(),
                         [&](const field_spec& f) { return f.name == key; })) {
            return bad_field("unknown field '" + echo_safe(key) + "'");
        }
    }
    for (const field_spec& spec : op.fields) {
        auto it = body.find(std::string(spec.name));
        if (it == body.end() || absent(spec, *it)) {
            if (spec.required) {
                return bad_field("missing field '" + std::string(spec.name) + "'");
            }
            continue;
        }
        if (auto st = check_field(spec, *it); !st) {
            return st;
        }
    }
    return ok_status();
}

std::map<std::string, std::string> env_of(const json& value) {
    std::map<std::string, std::string> env;
    if (value.is_object()) {
        for (const auto& [name, v] : value.items()) {
            env.emplace(name, v.get<std::string>());
        }
    }
    return env;
}

} // namespace kpool::protocol
