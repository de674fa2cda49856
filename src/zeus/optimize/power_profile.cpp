#include "zeus/optimize/power_profile.h"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <nlohmann/json.hpp>

#include "zeus/common/errors.h"
#include "zeus/common/json.h"
#include "zeus/common/parse.h"
#include "zeus/common/power.h"

namespace zeus::optimize {

SelectorOptions parse_selector(std::string_view text) {
  SelectorOptions options;
  if (text == "cost") {
    options.selector = LimitSelector::kCost;
  } else if (text == "energy") {
    options.selector = LimitSelector::kEnergy;
  } else if (text == "time") {
    options.selector = LimitSelector::kTime;
  } else if (text.rfind("slowdown:", 0) == 0) {
    const auto f = parse_number<double>(text.substr(9));
    if (!f || !(*f >= 1.0)) {
      throw ConfigError(fmt::format(
          "power-limit selector '{}': the slowdown factor must be a number >= 1, e.g. slowdown:1.1",
          text));
    }
    options.selector = LimitSelector::kMaxSlowdown;
    options.max_slowdown = *f;
  } else {
    throw ConfigError(fmt::format(
        "unknown power-limit selector '{}'; use cost, energy, time or slowdown:<factor>", text));
  }
  return options;
}

int64_t select_power_limit(std::span<const LimitMeasurement> measurements, const CostModel& cost,
                           const SelectorOptions& options) {
  ZEUS_ASSERT(!measurements.empty(), "no power-limit measurements to choose from");
  for (const auto& m : measurements) {
    ZEUS_ASSERT(m.throughput_ips > 0 && std::isfinite(m.power_w),
                "bad measurement at {} mW: {} it/s, {} W", m.power_limit_mw, m.throughput_ips,
                m.power_w);
  }
  if (options.selector == LimitSelector::kMaxSlowdown) {
    const auto fastest_limit = std::max_element(
        measurements.begin(), measurements.end(),
        [](const auto& a, const auto& b) { return a.power_limit_mw < b.power_limit_mw; });
    const double budget_s_per_it = options.max_slowdown / fastest_limit->throughput_ips;
    const LimitMeasurement* best = &*fastest_limit;
    for (const auto& m : measurements) {
      if (1.0 / m.throughput_ips <= budget_s_per_it && m.power_limit_mw < best->power_limit_mw) {
        best = &m;
      }
    }
    return best->power_limit_mw;
  }
  const auto score = [&](const LimitMeasurement& m) {
    switch (options.selector) {
      case LimitSelector::kEnergy:
        return m.power_w / m.throughput_ips;
      case LimitSelector::kTime:
        return 1.0 / m.throughput_ips;
      default:
        return cost.cost_per_iteration(m.power_w, m.throughput_ips);
    }
  };
  const LimitMeasurement* best = nullptr;
  double best_score = 0;
  for (const auto& m : measurements) {
    const double s = score(m);
    if (best == nullptr || s < best_score ||
        (s == best_score && m.power_limit_mw > best->power_limit_mw)) {
      best = &m;
      best_score = s;
    }
  }
  return best->power_limit_mw;
}

namespace {

// No GPU draws a megawatt: larger "limits" are corrupt input, not a value to convert.
constexpr double kMaxWatts = 1e6;

// Zeus keys its maps by the limit in W, written as a string.
std::string watts_key(int64_t mw) {
  return fmt::format("{}", mw_to_w(mw));  // "175", or "187.5"
}

int64_t key_to_mw(const std::string& key, std::string_view source) {
  const auto w = parse_number<double>(key);
  if (!w || !(*w > 0) || *w > kMaxWatts) {
    throw ConfigError(
        fmt::format("{}: power limit key '{}' is not a positive number of watts", source, key));
  }
  return w_to_mw(*w);
}

}  // namespace

std::string to_json(const PowerProfile& profile) {
  nlohmann::json j;
  j["job_id"] = profile.job_id;
  j["batch_size"] = profile.global_batch_size;
  j["train_power"] = nlohmann::json::object();
  j["train_throughput"] = nlohmann::json::object();
  for (const auto& [mw, m] : profile.train) {
    j["train_power"][watts_key(mw)] = m.power_w;
    j["train_throughput"][watts_key(mw)] = m.throughput_ips;
  }
  j["eval_power"] = nlohmann::json::object();
  j["eval_throughput"] = nlohmann::json::object();
  if (profile.eval_power_w && profile.eval_throughput_ips) {
    j["eval_power"][watts_key(profile.optimal_power_limit_mw)] = *profile.eval_power_w;
    j["eval_throughput"][watts_key(profile.optimal_power_limit_mw)] = *profile.eval_throughput_ips;
  }
  j["optimal_pl"] = mw_to_w(profile.optimal_power_limit_mw);
  return j.dump(2) + "\n";
}

PowerProfile power_profile_from_json(std::string_view text, std::string_view source) {
  try {
    const nlohmann::json j = nlohmann::json::parse(text);
    PowerProfile p;
    p.job_id = j.value("job_id", "");
    p.global_batch_size = json_int(j.at("batch_size"), fmt::format("{}: batch_size", source));
    if (p.global_batch_size <= 0) {
      throw ConfigError(
          fmt::format("{}: batch_size {} must be positive", source, p.global_batch_size));
    }
    const auto& power = j.at("train_power");
    const auto& tput = j.at("train_throughput");
    for (const auto& [key, value] : power.items()) {
      const int64_t mw = key_to_mw(key, source);
      const double w = value.get<double>();
      const double ips = tput.at(key).get<double>();
      if (!(w > 0) || !(ips > 0) || !std::isfinite(w) || !std::isfinite(ips)) {
        throw ConfigError(
            fmt::format("{}: limit {} W has power {} W and throughput {} it/s; both "
                        "must be positive",
                        source, key, w, ips));
      }
      p.train[mw] = {mw, ips, w};
    }
    if (p.train.empty()) {
      throw ConfigError(fmt::format("{}: no measured power limits", source));
    }
    const double optimal_w = j.at("optimal_pl").get<double>();
    if (!(optimal_w > 0) || optimal_w > kMaxWatts) {
      throw ConfigError(fmt::format("{}: optimal_pl {} W is not a power limit", source, optimal_w));
    }
    p.optimal_power_limit_mw = w_to_mw(optimal_w);
    if (!p.train.contains(p.optimal_power_limit_mw)) {
      throw ConfigError(
          fmt::format("{}: optimal_pl {} W is not among the measured limits", source, optimal_w));
    }
    const std::string opt_key = watts_key(p.optimal_power_limit_mw);
    if (j.contains("eval_power") && j["eval_power"].contains(opt_key)) {
      p.eval_power_w = j["eval_power"][opt_key].get<double>();
      p.eval_throughput_ips = j.at("eval_throughput").at(opt_key).get<double>();
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("power profile {} is corrupt ({}); delete it to profile again",
                                  source, e.what()));
  }
}

}  // namespace zeus::optimize
