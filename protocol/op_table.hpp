// Each control op as one row that both ends use: its fields' rules (control_ops.hpp's field_spec)
// and where each is stored in the op's args (control.hpp). read_request checks a request against
// its op's own row and reads it; write_request builds one from args. A field is added in its row,
// its args member and the handler that uses it; parse and build follow from the row.
#pragma once

#include "protocol/control.hpp"
#include "protocol/control_ops.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kpool::protocol {

// The ops that take no fields (ping, status, kernelspecs).
struct no_args {};

// Where a field's value is stored in the op's args; the member's type says how it is read and
// written (optional: written only when set; env: only when not empty; memory_history: "history").
template <class Args>
using field_member =
    std::variant<std::string Args::*, std::optional<std::string> Args::*,
                 std::optional<std::int64_t> Args::*, std::optional<double> Args::*, double Args::*,
                 int Args::*, std::optional<int> Args::*,
                 std::map<std::string, std::string> Args::*, bool Args::*>;

template <class Args>
struct bound_field {
    field_spec spec;
    field_member<Args> member;
};

template <class Args>
struct op_row {
    std::string_view name;
    std::vector<bound_field<Args>> fields;
};

namespace ops {
extern const op_row<no_args> ping;
extern const op_row<acquire_args> acquire;
extern const op_row<kernel_args> release;
extern const op_row<signal_args> signal;
extern const op_row<kernel_args> poll;
extern const op_row<renew_args> renew;
extern const op_row<context_args> context;
extern const op_row<no_args> status;
extern const op_row<no_args> kernelspecs;
extern const op_row<pool_args> resize;
extern const op_row<pool_args> drain;
} // namespace ops

namespace detail {
inline void read_value(const nlohmann::json& v, std::string& into) { into = v.get<std::string>(); }
inline void read_value(const nlohmann::json& v, std::optional<std::string>& into) {
    into = v.get<std::string>();
}
inline void read_value(const nlohmann::json& v, std::optional<std::int64_t>& into) {
    into = v.get<std::int64_t>();
}
inline void read_value(const nlohmann::json& v, std::optional<double>& into) {
    into = v.get<double>();
}
inline void read_value(const nlohmann::json& v, double& into) { into = v.get<double>(); }
inline void read_value(const nlohmann::json& v, int& into) { into = v.get<int>(); }
inline void read_value(const nlohmann::json& v, std::optional<int>& into) { into = v.get<int>(); }
inline void read_value(const nlohmann::json& v, std::map<std::string, std::string>& into) {
    into = env_of(v);
}
inline void read_value(const nlohmann::json& v, bool& into) { into = v == "memory"; }

template <class T>
void write_value(nlohmann::json& request, std::string_view name, const T& value) {
    request[std::string(name)] = value;
}
template <class T>
void write_value(nlohmann::json& request, std::string_view name, const std::optional<T>& value) {
    if (value) {
        request[std::string(name)] = *value;
    }
}
inline void write_value(nlohmann::json& request, std::string_view name,
                        const std::map<std::string, std::string>& env) {
    if (!env.empty()) {
        request[std::string(name)] = env;
    }
}
inline void write_value(nlohmann::json& request, std::string_view name, bool memory_history) {
    if (memory_history) {
        request[std::string(name)] = "memory";
    }
}
} // namespace detail

// The args of a request for `op`, checked against op's own row (unknown fields, required ones,
// each value's rules: the first problem in row order is the one reported).
template <class Args>
result<Args> read_request(const op_row<Args>& op, const nlohmann::json& body) {
    if (auto st = check_fields(*find_control_op(op.name), body); !st) {
        return st.err();
    }
    Args args{};
    for (const bound_field<Args>& f : op.fields) {
        const auto it = body.find(std::string(f.spec.name));
        if (it != body.end() && !it->is_null()) {
            std::visit([&](auto member) { detail::read_value(*it, args.*member); }, f.member);
        }
    }
    return args;
}

// The request for `op` with `args`: its fields that are set, in row order.
template <class Args>
nlohmann::json write_request(const op_row<Args>& op, const Args& args) {
    nlohmann::json request = {{"op", op.name}};
    for (const bound_field<Args>& f : op.fields) {
        std::visit([&](auto member) { detail::write_value(request, f.spec.name, args.*member); },
                   f.member);
    }
    return request;
}

} // namespace kpool::protocol
