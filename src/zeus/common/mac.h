// The one place for shared-secret cryptography (OpenSSL's libcrypto where the build has it): the
// HMACs of zeusd's tokens and of the rendezvous token, and the constant-time compares of every
// secret a server checks (Note [peer policy] in docs/security.md).
#pragma once

#include <string>
#include <string_view>

namespace zeus {

// HMAC-SHA256 of `data` under `key`: the 32 raw bytes, or 64 lowercase hex digits. Throws
// ConfigError where this build has no OpenSSL (saying how to get it).
std::string hmac_sha256(std::string_view key, std::string_view data);
std::string hmac_sha256_hex(std::string_view key, std::string_view data);

// Whether `a` and `b` are equal, in a time that does not tell how much of a guess matched (only
// whether its length did); false when either is empty.
bool constant_time_equal(std::string_view a, std::string_view b);

}  // namespace zeus
