#include "zeus/launch/rendezvous_auth.h"

#include <fmt/format.h>
#include <sys/random.h>

#include <cerrno>

#include "zeus/common/posix.h"

namespace zeus::launch {

std::string random_hex16() {
  unsigned char bytes[16];
  size_t got = 0;
  while (got < sizeof bytes) {
    const ssize_t n = ::getrandom(bytes + got, sizeof bytes - got, 0);
    if (n < 0 && errno == EINTR) {
      continue;
    }
    check_posix(n < 0 ? -1 : 0, "getrandom", "rendezvous nonce");
    got += static_cast<size_t>(n);
  }
  static constexpr char kHex[] = "0123456789abcdef";
  std::string hex;
  for (unsigned char b : bytes) {
    hex.push_back(kHex[b >> 4]);
    hex.push_back(kHex[b & 15]);
  }
  return hex;
}

std::string sign_record(const std::optional<std::string>& secret, std::string_view key,
                        std::string_view body) {
  return secret ? hmac_hex(*secret, fmt::format("zeus-rdzv-record|{}|{}", key, body)) : "";
}

bool verify_record(const std::optional<std::string>& secret, std::string_view key,
                   std::string_view body, std::string_view mac) {
  return secret ? same_mac(mac, sign_record(secret, key, body)) : mac.empty();
}

}  // namespace zeus::launch
