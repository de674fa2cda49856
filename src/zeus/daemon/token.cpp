#include "zeus/daemon/token.h"

#include <fmt/format.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "zeus/common/errors.h"
#include "zeus/common/mac.h"
#include "zeus/common/parse.h"

namespace zeus::daemon {

namespace {

constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
constexpr int64_t kLeewayS = 60;

std::string base64url(std::string_view in) {
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    const uint32_t v = (static_cast<uint8_t>(in[i]) << 16) |
                       (static_cast<uint8_t>(in[i + 1]) << 8) | static_cast<uint8_t>(in[i + 2]);
    for (int k = 18; k >= 0; k -= 6) {
      out += kAlphabet[(v >> k) & 63];
    }
  }
  if (const size_t rest = in.size() - i; rest > 0) {
    uint32_t v = static_cast<uint8_t>(in[i]) << 16;
    if (rest == 2) {
      v |= static_cast<uint8_t>(in[i + 1]) << 8;
    }
    out += kAlphabet[(v >> 18) & 63];
    out += kAlphabet[(v >> 12) & 63];
    if (rest == 2) {
      out += kAlphabet[(v >> 6) & 63];
    }
  }
  return out;
}

std::optional<std::string> unbase64url(std::string_view in) {
  std::string out;
  uint32_t acc = 0;
  int bits = 0;
  for (const char ch : in) {
    const char* p = std::strchr(kAlphabet, ch);
    if (ch == '\0' || p == nullptr) {
      return std::nullopt;
    }
    acc = (acc << 6) | static_cast<uint32_t>(p - kAlphabet);
    bits += 6;
    if (bits >= 8) {
      bits -= 8;
      out += static_cast<char>((acc >> bits) & 0xff);
    }
  }
  if (bits >= 6) {
    return std::nullopt;  // a length no encoder makes
  }
  return out;
}

TokenCheck reject(std::string reason, bool expired = false) {
  return {std::nullopt, {expired, std::move(reason)}};
}

}  // namespace

bool is_api_group(std::string_view name) {
  return name == kGroupGpuControl || name == kGroupGpuRead || name == kGroupCpuRead;
}

std::string issue_token(std::string_view key, const TokenClaims& claims) {
  nlohmann::json payload = {{"sub", claims.sub}, {"scopes", claims.scopes}};
  if (claims.exp) {
    payload["exp"] = *claims.exp;
  }
  const std::string signing_input =
      base64url(R"({"typ":"JWT","alg":"HS256"})") + "." + base64url(payload.dump());
  return signing_input + "." + base64url(hmac_sha256(key, signing_input));
}

TokenCheck verify_token(std::string_view key, std::string_view token,
                        std::chrono::system_clock::time_point now) {
  const auto dot1 = token.find('.');
  const auto dot2 = dot1 == std::string_view::npos ? dot1 : token.find('.', dot1 + 1);
  if (dot2 == std::string_view::npos || token.find('.', dot2 + 1) != std::string_view::npos) {
    return reject("InvalidToken");
  }
  const auto header = unbase64url(token.substr(0, dot1));
  const auto payload = unbase64url(token.substr(dot1 + 1, dot2 - dot1 - 1));
  const auto signature = unbase64url(token.substr(dot2 + 1));
  if (!header || !payload || !signature) {
    return reject("Base64 error");
  }
  try {
    const nlohmann::json h = nlohmann::json::parse(*header);
    if (h.at("alg").get<std::string>() != "HS256") {
      return reject("InvalidAlgorithm");
    }
  } catch (const nlohmann::json::exception& e) {
    return reject(fmt::format("JSON error: {}", e.what()));
  }
  const std::string expected = hmac_sha256(key, token.substr(0, dot2));
  if (!constant_time_equal(*signature, expected)) {
    return reject("InvalidSignature");
  }
  TokenClaims claims;
  try {
    const nlohmann::json p = nlohmann::json::parse(*payload);
    claims.sub = p.at("sub").get<std::string>();
    for (const auto& s : p.at("scopes")) {
      const std::string scope = s.get<std::string>();
      if (!is_api_group(scope)) {
        return reject(fmt::format("JSON error: unknown variant `{}`", scope));
      }
      claims.scopes.push_back(scope);
    }
    if (p.contains("exp")) {
      claims.exp = p.at("exp").get<int64_t>();
    }
  } catch (const nlohmann::json::exception& e) {
    return reject(fmt::format("JSON error: {}", e.what()));
  }
  const int64_t now_s =
      std::chrono::duration_cast<std::chrono::seconds>(now.time_since_epoch()).count();
  if (claims.exp && *claims.exp < now_s - kLeewayS) {
    return reject("ExpiredSignature", true);
  }
  return {std::move(claims), {}};
}

std::optional<std::chrono::seconds> parse_token_lifetime(std::string_view text) {
  if (text == "never" || text == "0") {
    return std::nullopt;
  }
  const char unit = text.empty() ? '\0' : text.back();
  const auto n = parse_number<int64_t>(text.substr(0, text.empty() ? 0 : text.size() - 1));
  int64_t scale = 0;
  switch (unit) {
    case 's':
      scale = 1;
      break;
    case 'm':
      scale = 60;
      break;
    case 'h':
      scale = 3600;
      break;
    case 'd':
      scale = 86400;
      break;
    default:
      break;
  }
  if (!n || *n <= 0 || scale == 0) {
    throw ConfigError(
        fmt::format("--expires '{}': give a count and a unit (30m, 1h, 7d, 30d) or 'never'", text));
  }
  return std::chrono::seconds(*n * scale);
}

}  // namespace zeus::daemon
