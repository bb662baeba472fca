// access_policy: ZAP requests built by hand, as libzmq sends them, and the decisions on them.
#include "daemon/service/access_policy.hpp"

#include <doctest/doctest.h>
#include <zmq.h>

using namespace kpool::daemon;

namespace {

std::vector<std::string> null_request(const std::string& address) {
    return {"1.0", "7", "kpool", address, "", "NULL"};
}

std::vector<std::string> curve_request(const std::string& key) {
    return {"1.0", "8", "kpool", "127.0.0.1", "", "CURVE", key};
}

std::string binary_key(const char* z85) {
    std::string key(32, '\0');
    REQUIRE(zmq_z85_decode(reinterpret_cast<std::uint8_t*>(key.data()), z85) != nullptr);
    return key;
}

} // namespace

TEST_SUITE("access_policy") {
    TEST_CASE("ipc peers: own uid, allowed uids and primary gids get in; nobody else") {
        access_policy policy{1000, {2000}, {50}, {}};
        CHECK(decide(policy, null_request("localhost:1000:1000:4321")).allowed);
        CHECK(decide(policy, null_request("localhost:2000:2000:1")).allowed);
        auto by_group = decide(policy, null_request("localhost:3000:50:1"));
        CHECK(by_group.allowed);
        CHECK(by_group.user_id == "uid:3000");
        auto other = decide(policy, null_request("localhost:3000:3000:1"));
        CHECK_FALSE(other.allowed);
        CHECK(other.reason == "uid 3000 (gid 3000) is not in allowed_uids or allowed_gids");
        // No credentials (not an ipc peer, or a libzmq without SO_PEERCRED): fail closed.
        CHECK_FALSE(decide(policy, null_request("127.0.0.1")).allowed);
        CHECK_FALSE(decide(policy, null_request("localhost:x:1:1")).allowed);
    }

    TEST_CASE("tcp peers: only CURVE keys on the allow-list") {
        const char* allowed_z85 = "rq:rM>}U?@Lns47E1%kR.o@n%FcmmsL/@{H8]yf7";
        const char* other_z85 = "Yne@$w-vo<fVvi]a<NY6T1ed:M$fCG*[IaLV{hID";
        access_policy policy{0, {}, {}, {binary_key(allowed_z85)}};
        auto ok = decide(policy, curve_request(binary_key(allowed_z85)));
        CHECK(ok.allowed);
        CHECK(ok.user_id == allowed_z85);
        auto no = decide(policy, curve_request(binary_key(other_z85)));
        CHECK_FALSE(no.allowed);
        CHECK(no.reason == std::string("CURVE key ") + other_z85 + " is not in curve_allowed_keys");
        CHECK_FALSE(decide(policy, curve_request("short")).allowed);
        // With CURVE configured, NULL is never enough, even from our own uid.
        CHECK_FALSE(decide(policy, null_request("localhost:0:0:1")).allowed);
    }

    TEST_CASE("malformed requests and other mechanisms are refused; replies follow RFC 27") {
        access_policy policy{0, {}, {}, {}};
        CHECK_FALSE(decide(policy, {}).allowed);
        CHECK_FALSE(decide(policy, {"2.0", "1", "d", "localhost:0:0:1", "", "NULL"}).allowed);
        auto plain = decide(policy, {"1.0", "1", "d", "a", "", "PLAIN", "user", "pass"});
        CHECK_FALSE(plain.allowed);
        CHECK(plain.reason == "mechanism PLAIN is not accepted here");
        const auto request = null_request("localhost:0:0:1");
        CHECK(zap_reply(request, decide(policy, request)) ==
              std::vector<std::string>{"1.0", "7", "200", "OK", "uid:0", ""});
        CHECK(zap_reply(request, plain) ==
              std::vector<std::string>{"1.0", "7", "400", "mechanism PLAIN is not accepted here",
                                       "", ""});
    }
}
