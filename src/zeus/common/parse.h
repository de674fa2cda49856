// Parsing user text without std::stoi's slack: the whole string must be the number (no sign
// tricks, spaces or trailing characters) and out-of-range values are refused, so every caller
// only adds its own bounds and its own error message naming the flag, variable or file.
#pragma once

#include <charconv>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zeus {

// The number `text` spells exactly (integers or floating point), or std::nullopt.
template <typename T>
std::optional<T> parse_number(std::string_view text) {
  T value{};
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

// The integer `text` spells exactly; ConfigError "WHAT='TEXT' is not an integer" otherwise
// (`what` names the flag or variable).
int parse_int_or_throw(std::string_view text, std::string_view what);

// Case-insensitive ASCII comparison.
bool iequals(std::string_view a, std::string_view b);
// `text` with ASCII letters in lower case.
std::string to_lower(std::string_view text);
// `text` without leading and trailing white space (space, tab, CR, LF, VT, FF).
std::string_view trim(std::string_view text);

// "a,b,,c" -> a, b, "", c (empty fields kept; "" -> one empty field).
std::vector<std::string> split(std::string_view text, char separator);

}  // namespace zeus
