// HMAC-SHA256 against RFC 4231 vectors, including keys of lengths other than 32 bytes.
#include "protocol/hmac.hpp"

#include <doctest/doctest.h>

using kpool::protocol::hmac_sha256_hex;

TEST_SUITE("hmac") {
    TEST_CASE("RFC 4231 test case 2: short key") {
        CHECK(hmac_sha256_hex("Jefe", {"what do ya want ", "for nothing?"}) ==
              "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
    }

    TEST_CASE("RFC 4231 test case 6: key longer than the block size") {
        const std::string key(131, '\xaa');
        CHECK(hmac_sha256_hex(key, {"Test Using Larger Than Block-Size Key - Hash Key First"}) ==
              "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
    }

    TEST_CASE("signature comparison") {
        CHECK(kpool::protocol::signatures_equal("abc", "abc"));
        CHECK_FALSE(kpool::protocol::signatures_equal("abc", "abd"));
        CHECK_FALSE(kpool::protocol::signatures_equal("abc", "abcd"));
    }

    TEST_CASE("random_hex is fresh every time and of the asked length") {
        const auto a = kpool::protocol::random_hex(32);
        const auto b = kpool::protocol::random_hex(32);
        CHECK(a.size() == 64);
        CHECK(a != b);
    }
}
