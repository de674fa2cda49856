// zeusd's bearer tokens: HS256 JSON Web Tokens with Zeus 0.16's claims
// ({"sub": user, "scopes": ["gpu-read", ...], "exp": unix seconds, optional}), signed with the
// raw bytes of the signing-key file, as upstream's `zeusd token issue` makes them.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zeus::daemon {

// The API groups, in upstream's spelling.
inline constexpr std::string_view kGroupGpuControl = "gpu-control";
inline constexpr std::string_view kGroupGpuRead = "gpu-read";
inline constexpr std::string_view kGroupCpuRead = "cpu-read";
bool is_api_group(std::string_view name);

struct TokenClaims {
  std::string sub;
  std::vector<std::string> scopes;
  std::optional<int64_t> exp;  // unix seconds; none: never expires
};

// Signs `claims` with `key`.
std::string issue_token(std::string_view key, const TokenClaims& claims);

// Why a token was refused; `expired` separates upstream's two 401 messages.
struct TokenRejection {
  bool expired = false;
  std::string reason;
};

// Verifies signature (HS256 only), claims and expiry (60 s of leeway, as upstream's jsonwebtoken
// validation). Returns the claims, or the rejection.
struct TokenCheck {
  std::optional<TokenClaims> claims;
  TokenRejection rejection;
};
TokenCheck verify_token(std::string_view key, std::string_view token,
                        std::chrono::system_clock::time_point now);

// "1h", "7d", "30d", "45m", "90s" -> seconds; "never" and "0" -> std::nullopt. Throws ConfigError.
std::optional<std::chrono::seconds> parse_token_lifetime(std::string_view text);

}  // namespace zeus::daemon
