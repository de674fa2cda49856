// Where this build has no OpenSSL: a secret cannot be used, and saying so is the only answer.
#include "zeus/common/errors.h"
#include "zeus/common/mac.h"

namespace zeus {

std::string hmac_sha256(std::string_view, std::string_view) {
  throw ConfigError(
      "tokens need OpenSSL's libcrypto, which this build of zeus-cpp lacks: rebuild with "
      "libssl-dev installed, or run without a token (--rdzv-conf token_file, zeusd's "
      "--signing-key-path)");
}

std::string hmac_sha256_hex(std::string_view key, std::string_view data) {
  return hmac_sha256(key, data);
}

bool constant_time_equal(std::string_view, std::string_view) {
  return false;
}

}  // namespace zeus
