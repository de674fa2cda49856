#include "zeus/optimize/bso_policy.h"

#include <fmt/format.h>

#include <cmath>

#include "zeus/common/errors.h"
#include "zeus/common/parse.h"

namespace zeus::optimize {

std::string_view to_string(BsoPolicy policy) {
  return policy == BsoPolicy::kLean ? "lean" : "zeus";
}

BsoPolicy parse_policy(std::string_view text) {
  if (iequals(text, "zeus")) {
    return BsoPolicy::kZeus;
  }
  if (iequals(text, "lean")) {
    return BsoPolicy::kLean;
  }
  throw ConfigError(fmt::format(
      "--policy '{}': choose zeus (the paper's algorithm) or lean (this project's, which prunes "
      "with less waste)",
      text));
}

std::string to_string(const LeanOptions& l) {
  return fmt::format("gamma={},patience={},retry={},cap={},spread={}", l.gamma, l.patience, l.retry,
                     l.cap, l.spread);
}

LeanOptions parse_lean_options(std::string_view text, LeanOptions base) {
  constexpr std::string_view kHelp =
      "write key=value pairs separated by commas: gamma (0 or >= 1), patience (>= 1), retry (0 "
      "or >= 1), cap (0 or >= 1), spread (> 0)";
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      throw ConfigError(fmt::format("--lean '{}': no '=' in it; {}", item, kHelp));
    }
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    const auto number = parse_number<double>(value);
    auto bad = [&] {
      return ConfigError(fmt::format("--lean {}: '{}' is out of range; {}", key, value, kHelp));
    };
    if (!number || !std::isfinite(*number)) {
      throw bad();
    }
    const double v = *number;
    if (key == "gamma" || key == "retry" || key == "cap") {
      if (v != 0 && v < 1) {
        throw bad();
      }
      (key == "gamma" ? base.gamma : key == "retry" ? base.retry : base.cap) = v;
    } else if (key == "patience") {
      if (v < 1 || v != std::floor(v) || v > 1000) {
        throw bad();
      }
      base.patience = static_cast<int>(v);
    } else if (key == "spread") {
      if (!(v > 0)) {
        throw bad();
      }
      base.spread = v;
    } else {
      throw ConfigError(fmt::format("--lean: unknown knob '{}'; {}", key, kHelp));
    }
  }
  return base;
}

}  // namespace zeus::optimize
