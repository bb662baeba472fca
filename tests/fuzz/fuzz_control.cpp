// libFuzzer target: the control protocol's request parser and every op's argument parser, then
// the reply builders, on arbitrary bytes. Crashes, sanitizer reports and broken invariants
// (a reply that is not one JSON object, an echo longer than promised) are failures.
#include "protocol/control.hpp"
#include "protocol/op_table.hpp"
#include "protocol/text.hpp"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {

void require(bool condition) {
    if (!condition) {
        std::abort();
    }
}

void check_reply(const std::string& reply) {
    const auto j = nlohmann::json::parse(reply, nullptr, false);
    require(!j.is_discarded() && j.is_object() && j.contains("ok"));
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace kpool;
    const std::string_view bytes(reinterpret_cast<const char*>(data), size);
    require(protocol::echo_safe(bytes).size() <= 200);
    auto req = protocol::parse_control_request(bytes);
    if (!req) {
        check_reply(protocol::make_error_reply(req.err(), protocol::salvage_req_id(bytes)));
        return 0;
    }
    const nlohmann::json& body = req->body;
    // Every op's row reads the body: a refusal is a well-formed reply; what one reads, that row
    // writes back into a request it reads again.
    const auto each_row = [&](const auto& row) {
        auto args = protocol::read_request(row, body);
        if (!args) {
            return check_reply(protocol::make_error_reply(args.err(), req->req_id));
        }
        require(protocol::read_request(row, protocol::write_request(row, *args)).ok());
    };
    namespace ops = protocol::ops;
    each_row(ops::ping);
    each_row(ops::acquire);
    each_row(ops::release);
    each_row(ops::signal);
    each_row(ops::poll);
    each_row(ops::renew);
    each_row(ops::context);
    each_row(ops::status);
    each_row(ops::kernelspecs);
    each_row(ops::resize);
    each_row(ops::drain);
    check_reply(protocol::make_ok_reply({{"echo", body}}, req->req_id));
    return 0;
}
