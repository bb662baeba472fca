// libFuzzer target: the control protocol's request parser and every op's argument parser, then
// the reply builders, on arbitrary bytes. Crashes, sanitizer reports and broken invariants
// (a reply that is not one JSON object, an echo longer than promised) are failures.
#include "protocol/control.hpp"

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
    if (auto a = protocol::parse_acquire(body); !a) {
        check_reply(protocol::make_error_reply(a.err(), req->req_id));
    }
    if (auto k = protocol::parse_kernel_op(body); !k) {
        check_reply(protocol::make_error_reply(k.err(), req->req_id));
    }
    if (auto s = protocol::parse_signal(body); !s) {
        check_reply(protocol::make_error_reply(s.err(), req->req_id));
    }
    (void)protocol::parse_no_args(body);
    check_reply(protocol::make_ok_reply({{"echo", body}}, req->req_id));
    return 0;
}
