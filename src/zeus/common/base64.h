// RFC 4648 base64: etcd's JSON gateway carries keys and values in it (standard alphabet, padded),
// the Pushgateway's grouping keys in its URL-safe form without padding.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace zeus {

enum class Base64 { kStandard, kUrlNoPadding };

std::string base64_encode(std::string_view bytes, Base64 form = Base64::kStandard);
// The bytes of standard, padded base64 (whitespace not allowed); nullopt when `text` is not.
std::optional<std::string> base64_decode(std::string_view text);

}  // namespace zeus
