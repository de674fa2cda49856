#include "zeus/common/base64.h"

#include <array>
#include <cstdint>

namespace zeus {
namespace {

constexpr std::string_view kStandardAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::string_view kUrlAlphabet =
    "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

constexpr std::array<int8_t, 256> decode_table() {
  std::array<int8_t, 256> t{};
  for (auto& v : t) {
    v = -1;
  }
  for (size_t i = 0; i < kStandardAlphabet.size(); ++i) {
    t[static_cast<unsigned char>(kStandardAlphabet[i])] = static_cast<int8_t>(i);
  }
  return t;
}

}  // namespace

std::string base64_encode(std::string_view bytes, Base64 form) {
  const std::string_view alphabet = form == Base64::kStandard ? kStandardAlphabet : kUrlAlphabet;
  const bool pad = form == Base64::kStandard;
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  size_t i = 0;
  for (; i + 2 < bytes.size(); i += 3) {
    const uint32_t n = (static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16) |
                       (static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8) |
                       static_cast<unsigned char>(bytes[i + 2]);
    out += alphabet[(n >> 18) & 63];
    out += alphabet[(n >> 12) & 63];
    out += alphabet[(n >> 6) & 63];
    out += alphabet[n & 63];
  }
  const size_t left = bytes.size() - i;
  if (left > 0) {
    uint32_t n = static_cast<uint32_t>(static_cast<unsigned char>(bytes[i])) << 16;
    if (left == 2) {
      n |= static_cast<uint32_t>(static_cast<unsigned char>(bytes[i + 1])) << 8;
    }
    out += alphabet[(n >> 18) & 63];
    out += alphabet[(n >> 12) & 63];
    if (left == 2) {
      out += alphabet[(n >> 6) & 63];
    }
    if (pad) {
      out.append(3 - left, '=');
    }
  }
  return out;
}

std::optional<std::string> base64_decode(std::string_view text) {
  static constexpr auto kTable = decode_table();
  if (text.size() % 4 != 0) {
    return std::nullopt;
  }
  std::string out;
  out.reserve(text.size() / 4 * 3);
  for (size_t i = 0; i < text.size(); i += 4) {
    const bool last = i + 4 == text.size();
    const size_t padding = last ? (text[i + 3] == '=' ? (text[i + 2] == '=' ? 2 : 1) : 0) : 0;
    uint32_t n = 0;
    for (size_t k = 0; k < 4; ++k) {
      if (k >= 4 - padding) {
        n <<= 6;
        continue;
      }
      const int8_t v = kTable[static_cast<unsigned char>(text[i + k])];
      if (v < 0) {
        return std::nullopt;
      }
      n = (n << 6) | static_cast<uint32_t>(v);
    }
    out += static_cast<char>((n >> 16) & 0xff);
    if (padding < 2) {
      out += static_cast<char>((n >> 8) & 0xff);
    }
    if (padding < 1) {
      out += static_cast<char>(n & 0xff);
    }
  }
  return out;
}

}  // namespace zeus
