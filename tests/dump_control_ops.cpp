// The control protocol's op table (protocol/op_table.hpp) as JSON, written at build time to
// control_ops.json so the Python client's tests check its requests against the same rows kpoold
// reads them with (tests/integration/test_client_ops.py).
#include "protocol/control_ops.hpp"
#include "protocol/text.hpp"

#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

namespace {

const char* kind_name(kpool::protocol::field_kind kind) {
    using kpool::protocol::field_kind;
    switch (kind) {
    case field_kind::name: return "name";
    case field_kind::integer: return "integer";
    case field_kind::seconds: return "seconds";
    case field_kind::path: return "path";
    case field_kind::env: return "env";
    case field_kind::history: return "history";
    }
    return "?";
}

} // namespace

int main(int argc, char** argv) {
    if (argc != 2) {
        std::fprintf(stderr, "usage: dump_control_ops OUT.json\n");
        return 2;
    }
    nlohmann::json ops = nlohmann::json::array();
    for (const auto& op : kpool::protocol::control_ops()) {
        nlohmann::json fields = nlohmann::json::array();
        for (const auto& f : op.fields) {
            nlohmann::json field = {
                {"name", f.name}, {"kind", kind_name(f.kind)}, {"required", f.required}};
            if (f.kind == kpool::protocol::field_kind::integer) {
                field["min"] = f.min;
                field["max"] = f.max;
            }
            fields.push_back(std::move(field));
        }
        ops.push_back({{"op", op.name}, {"fields", std::move(fields)}});
    }
    std::ofstream out(argv[1]);
    out << kpool::protocol::dump_json(ops) << "\n";
    return out.good() ? 0 : 1;
}
