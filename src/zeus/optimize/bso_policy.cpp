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

namespace {

constexpr std::string_view kLeanHelp =
    "write key=value pairs separated by commas: gamma (0 or >= 1), patience (>= 1), retry (0 or "
    ">= 1), cap (0 or >= 1), spread (> 0)";

ConfigError bad_knob(std::string_view key, std::string_view value) {
  return ConfigError(fmt::format("--lean {}: '{}' is out of range; {}", key, value, kLeanHelp));
}

}  // namespace

void check_lean_options(const LeanOptions& l) {
  for (const auto& [key, v] : {std::pair{"gamma", l.gamma}, {"retry", l.retry}, {"cap", l.cap}}) {
    if (!std::isfinite(v) || (v != 0 && v < 1)) {
      throw bad_knob(key, fmt::format("{}", v));
    }
  }
  if (l.patience < 1 || l.patience > 1000) {
    throw bad_knob("patience", std::to_string(l.patience));
  }
  if (!std::isfinite(l.spread) || !(l.spread > 0)) {
    throw bad_knob("spread", fmt::format("{}", l.spread));
  }
}

LeanOptions parse_lean_options(std::string_view text, LeanOptions base) {
  while (!text.empty()) {
    const size_t comma = text.find(',');
    const std::string_view item = text.substr(0, comma);
    text = comma == std::string_view::npos ? std::string_view() : text.substr(comma + 1);
    const size_t eq = item.find('=');
    if (eq == std::string_view::npos) {
      throw ConfigError(fmt::format("--lean '{}': no '=' in it; {}", item, kLeanHelp));
    }
    const std::string_view key = item.substr(0, eq);
    const std::string_view value = item.substr(eq + 1);
    const auto number = parse_number<double>(value);
    if (!number || !std::isfinite(*number)) {
      throw bad_knob(key, value);
    }
    const double v = *number;
    if (key == "gamma" || key == "retry" || key == "cap") {
      (key == "gamma" ? base.gamma : key == "retry" ? base.retry : base.cap) = v;
    } else if (key == "patience") {
      if (v != std::floor(v) || v < 1 || v > 1000) {
        throw bad_knob(key, value);  // checked before the conversion to int
      }
      base.patience = static_cast<int>(v);
    } else if (key == "spread") {
      base.spread = v;
    } else {
      throw ConfigError(fmt::format("--lean: unknown knob '{}'; {}", key, kLeanHelp));
    }
    try {
      check_lean_options(base);
    } catch (const ConfigError&) {
      throw bad_knob(key, value);  // named as the user wrote it
    }
  }
  return base;
}

PolicyChoice parse_policy_choice(std::string_view policy, std::string_view lean) {
  PolicyChoice choice{parse_policy(policy), {}};
  if (!lean.empty() && choice.policy != BsoPolicy::kLean) {
    throw ConfigError(fmt::format("--lean '{}' sets lean's knobs; add --policy lean", lean));
  }
  choice.lean = parse_lean_options(lean);
  return choice;
}

std::string policy_label(const PolicyChoice& choice) {
  return choice.policy == BsoPolicy::kLean ? fmt::format("lean ({})", to_string(choice.lean))
                                           : std::string(to_string(choice.policy));
}

}  // namespace zeus::optimize
