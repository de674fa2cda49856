// HMAC-SHA256 and the constant-time compare from OpenSSL's libcrypto.
#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>

#include "zeus/common/errors.h"
#include "zeus/common/mac.h"

namespace zeus {

std::string hmac_sha256(std::string_view key, std::string_view data) {
  unsigned char digest[EVP_MAX_MD_SIZE];
  unsigned int size = 0;
  if (HMAC(EVP_sha256(), key.data(), static_cast<int>(key.size()),
           reinterpret_cast<const unsigned char*>(data.data()), data.size(), digest,
           &size) == nullptr) {
    throw InternalError("OpenSSL's HMAC-SHA256 failed");
  }
  return {reinterpret_cast<const char*>(digest), size};
}

std::string hmac_sha256_hex(std::string_view key, std::string_view data) {
  static constexpr char kHex[] = "0123456789abcdef";
  const std::string raw = hmac_sha256(key, data);
  std::string hex;
  hex.reserve(2 * raw.size());
  for (const char ch : raw) {
    const auto byte = static_cast<unsigned char>(ch);
    hex.push_back(kHex[byte >> 4]);
    hex.push_back(kHex[byte & 15]);
  }
  return hex;
}

bool constant_time_equal(std::string_view a, std::string_view b) {
  return a.size() == b.size() && !a.empty() && CRYPTO_memcmp(a.data(), b.data(), a.size()) == 0;
}

}  // namespace zeus
