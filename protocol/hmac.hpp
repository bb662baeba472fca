// HMAC-SHA256 over Jupyter message frames (libsodium), hex-encoded as the wire protocol wants.
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>

namespace kpool::protocol {

// Hex HMAC-SHA256 of the concatenated parts. Any key length works (Jupyter keys are not 32 bytes).
std::string hmac_sha256_hex(std::string_view key, std::initializer_list<std::string_view> parts);

// Compares two signatures in time independent of where they differ.
bool signatures_equal(std::string_view a, std::string_view b) noexcept;

// `bytes` random bytes, hex-encoded: kernel keys and ids.
std::string random_hex(std::size_t bytes);

} // namespace kpool::protocol
