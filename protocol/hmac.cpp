// HMAC-SHA256 and randomness through libsodium.
#include "protocol/hmac.hpp"

#include <sodium.h>

#include <stdexcept>
#include <vector>

namespace kpool::protocol {
namespace {

void ensure_sodium() {
    // sodium_init is idempotent and thread-safe; -1 means no usable randomness source.
    static const int rc = sodium_init();
    if (rc < 0) {
        throw std::runtime_error("libsodium failed to initialise");
    }
}

std::string to_hex(const unsigned char* data, std::size_t len) {
    std::string out(len * 2 + 1, '\0');
    sodium_bin2hex(out.data(), out.size(), data, len);
    out.pop_back();
    return out;
}

const unsigned char* bytes_of(std::string_view s) {
    return reinterpret_cast<const unsigned char*>(s.data());
}

} // namespace

std::string hmac_sha256_hex(std::string_view key, std::initializer_list<std::string_view> parts) {
    ensure_sodium();
    crypto_auth_hmacsha256_state state;
    crypto_auth_hmacsha256_init(&state, bytes_of(key), key.size());
    for (std::string_view part : parts) {
        crypto_auth_hmacsha256_update(&state, bytes_of(part), part.size());
    }
    unsigned char mac[crypto_auth_hmacsha256_BYTES];
    crypto_auth_hmacsha256_final(&state, mac);
    return to_hex(mac, sizeof mac);
}

bool signatures_equal(std::string_view a, std::string_view b) noexcept {
    if (a.size() != b.size()) {
        return false;
    }
    return sodium_memcmp(a.data(), b.data(), a.size()) == 0;
}

std::string random_hex(std::size_t bytes) {
    ensure_sodium();
    std::vector<unsigned char> buf(bytes);
    randombytes_buf(buf.data(), buf.size());
    return to_hex(buf.data(), buf.size());
}

} // namespace kpool::protocol
