// Typed builders of control requests: each op's row (protocol/op_table.hpp) writes it.
#include "protocol/control_requests.hpp"

#include "protocol/op_table.hpp"

namespace kpool::protocol::requests {

using json = nlohmann::json;

json ping() { return write_request(ops::ping, {}); }
json status() { return write_request(ops::status, {}); }
json kernelspecs() { return write_request(ops::kernelspecs, {}); }
json acquire(const acquire_args& args) { return write_request(ops::acquire, args); }
json release(std::string_view kernel_id) {
    return write_request(ops::release, {std::string(kernel_id)});
}
json poll(std::string_view kernel_id) { return write_request(ops::poll, {std::string(kernel_id)}); }
json renew(std::string_view kernel_id, double lease_s) {
    return write_request(ops::renew, {std::string(kernel_id), lease_s});
}
json signal(std::string_view kernel_id, int signum) {
    return write_request(ops::signal, {std::string(kernel_id), signum});
}
json context(const context_args& args) { return write_request(ops::context, args); }
json resize(std::string_view pool, std::int64_t size) {
    // Out of an int's range: kpoold's check refuses it (the row's bounds are 0 to 4096).
    json r = write_request(ops::resize, {std::string(pool), 0});
    r["size"] = size;
    return r;
}
json drain(std::string_view pool) { return write_request(ops::drain, {std::string(pool), {}}); }

std::string_view op_of(const json& request) {
    auto it = request.find("op");
    return it != request.end() && it->is_string()
               ? std::string_view(it->get_ref<const std::string&>())
               : std::string_view();
}

} // namespace kpool::protocol::requests
