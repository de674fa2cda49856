// Where this build has no OpenSSL: a token cannot be used, and saying so is the only answer.
#include "zeus/common/errors.h"
#include "zeus/launch/rendezvous_auth.h"

namespace zeus::launch {

std::string hmac_hex(std::string_view, std::string_view) {
  throw ConfigError(
      "a rendezvous token needs OpenSSL's libcrypto, which this build of zeus-cpp lacks: rebuild "
      "with libssl-dev, or run without --rdzv-conf token_file");
}

bool same_mac(std::string_view, std::string_view) {
  return false;
}

}  // namespace zeus::launch
