// sandbox_spec: the helper's and the zygote's instructions for one kernel's sandbox, as JSON.
#include "protocol/sandbox_spec.hpp"

#include <nlohmann/json.hpp>

namespace kpool::protocol {
namespace {

using json = nlohmann::json;

// Each field once: its JSON name and where it lives in the struct.
template <class F>
void each_field(sandbox_spec& s, F&& f) {
    f("user_namespace", s.user_namespace);
    f("uid", s.uid);
    f("gid", s.gid);
    f("network", s.network);
    f("readable", s.readable);
    f("writable", s.writable);
    f("roots", s.roots);
    f("files", s.files);
    f("private_dirs", s.private_dirs);
    f("hidden", s.hidden);
    f("cwd", s.cwd);
    f("cgroup_procs", s.cgroup_procs);
    f("processes", s.processes);
}

} // namespace

std::string format(const sandbox_spec& spec) {
    json j = json::object();
    sandbox_spec copy = spec;
    each_field(copy, [&](const char* name, const auto& value) { j[name] = value; });
    return j.dump();
}

result<sandbox_spec> parse_sandbox_spec(std::string_view json_text) {
    const json j = json::parse(json_text, nullptr, false);
    if (!j.is_object()) {
        return error{errc::bad_request, "sandbox spec: not a JSON object"};
    }
    sandbox_spec spec;
    std::string wrong;
    each_field(spec, [&](const char* name, auto& value) {
        const auto it = j.find(name);
        if (it == j.end() || !wrong.empty()) {
            return;
        }
        try {
            it->get_to(value);
        } catch (const json::exception&) {
            wrong = name;
        }
    });
    if (!wrong.empty()) {
        return error{errc::bad_request, "sandbox spec: '" + wrong + "' has the wrong type"};
    }
    return spec;
}

} // namespace kpool::protocol
