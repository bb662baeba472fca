// Connection-file fields <-> JSON, with validation of what a kernel wrote.
#include "protocol/connection_info.hpp"

namespace kpool::protocol {
namespace {
using json = nlohmann::json;
} // namespace

bool connection_info::ports_assigned() const noexcept {
    return shell_port != 0 && iopub_port != 0 && stdin_port != 0 && control_port != 0 &&
           hb_port != 0;
}

std::string connection_info::endpoint(std::uint16_t port) const {
    if (transport == "ipc") {
        return "ipc://" + ip + "-" + std::to_string(port);
    }
    return "tcp://" + ip + ":" + std::to_string(port);
}

json to_json(const connection_info& info) {
    return json{{"shell_port", info.shell_port},
                {"iopub_port", info.iopub_port},
                {"stdin_port", info.stdin_port},
                {"control_port", info.control_port},
                {"hb_port", info.hb_port},
                {"ip", info.ip},
                {"key", info.key},
                {"transport", info.transport},
                {"signature_scheme", info.signature_scheme},
                {"kernel_name", info.kernel_name}};
}

namespace {

result<std::uint16_t> port_field(const json& j, const char* name) {
    auto it = j.find(name);
    if (it == j.end() || !it->is_number_integer() || it->get<std::int64_t>() < 0 ||
        it->get<std::int64_t>() > 65535) {
        return error{errc::bad_request, std::string("connection info: bad or missing ") + name};
    }
    return static_cast<std::uint16_t>(it->get<std::int64_t>());
}

result<std::string> string_field(const json& j, const char* name, bool required) {
    auto it = j.find(name);
    if (it == j.end() && !required) {
        return std::string{};
    }
    if (it == j.end() || !it->is_string()) {
        return error{errc::bad_request, std::string("connection info: bad or missing ") + name};
    }
    return it->get<std::string>();
}

} // namespace

result<connection_info> connection_info_from_json(const json& j) {
    if (!j.is_object()) {
        return error{errc::bad_request, "connection info is not a JSON object"};
    }
    connection_info info;
    struct port_slot {
        const char* name;
        std::uint16_t* dest;
    };
    const port_slot ports[] = {{"shell_port", &info.shell_port},
                               {"iopub_port", &info.iopub_port},
                               {"stdin_port", &info.stdin_port},
                               {"control_port", &info.control_port},
                               {"hb_port", &info.hb_port}};
    for (const auto& slot : ports) {
        auto port = port_field(j, slot.name);
        if (!port) {
            return port.err();
        }
        *slot.dest = *port;
    }
    struct string_slot {
        const char* name;
        std::string* dest;
        bool required;
    };
    const string_slot strings[] = {{"ip", &info.ip, true},
                                   {"key", &info.key, true},
                                   {"transport", &info.transport, true},
                                   {"signature_scheme", &info.signature_scheme, false},
                                   {"kernel_name", &info.kernel_name, false}};
    for (const auto& slot : strings) {
        auto value = string_field(j, slot.name, slot.required);
        if (!value) {
            return value.err();
        }
        *slot.dest = std::move(*value);
    }
    if (info.signature_scheme.empty()) {
        info.signature_scheme = "hmac-sha256";
    }
    if (info.transport != "tcp" && info.transport != "ipc") {
        return error{errc::bad_request, "connection info: transport must be tcp or ipc"};
    }
    return info;
}

} // namespace kpool::protocol
