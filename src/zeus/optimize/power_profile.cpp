#include "zeus/optimize/power_profile.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
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

// The curves of a "per_gpu" array.
std::vector<GpuCurve> read_curves(const nlohmann::json& array, std::string_view source) {
  const auto positive = [&](double v, std::string_view what, size_t gpu) {
    if (!(v > 0) || !std::isfinite(v) || v > kMaxWatts) {
      throw ConfigError(
          fmt::format("{}: per_gpu[{}] has {} {}; it must be positive", source, gpu, what, v));
    }
    return v;
  };
  std::vector<GpuCurve> out;
  for (const auto& c : array) {
    const size_t g = out.size();
    GpuCurve curve;
    curve.idle_power_w = c.at("idle_power").get<double>();
    if (!(curve.idle_power_w >= 0) || !std::isfinite(curve.idle_power_w)) {
      throw ConfigError(
          fmt::format("{}: per_gpu[{}] has idle power {} W", source, g, curve.idle_power_w));
    }
    curve.max_limit_mw = w_to_mw(positive(c.at("max_pl").get<double>(), "max_pl", g));
    const auto& power = c.at("power");
    for (const auto& [key, value] : c.at("time_per_iteration").items()) {
      curve.points.push_back({key_to_mw(key, source),
                              positive(value.get<double>(), "time per iteration", g),
                              positive(power.at(key).get<double>(), "power", g)});
    }
    if (curve.points.empty()) {
      throw ConfigError(fmt::format("{}: per_gpu[{}] has no measured limit", source, g));
    }
    curve.uuid = c.value("uuid", "");
    curve.host = c.value("host", "");
    out.push_back(std::move(curve));
  }
  return out;
}

nlohmann::json write_curves(std::span<const GpuCurve> curves) {
  nlohmann::json out = nlohmann::json::array();
  for (const auto& c : curves) {
    nlohmann::json time = nlohmann::json::object();
    nlohmann::json power = nlohmann::json::object();
    for (const auto& p : c.points) {
      time[watts_key(p.limit_mw)] = p.time_s;
      power[watts_key(p.limit_mw)] = p.power_w;
    }
    nlohmann::json curve = {{"time_per_iteration", time},
                            {"power", power},
                            {"idle_power", c.idle_power_w},
                            {"max_pl", mw_to_w(c.max_limit_mw)}};
    if (!c.uuid.empty()) {
      curve["uuid"] = c.uuid;
      curve["host"] = c.host;
    }
    out.push_back(std::move(curve));
  }
  return out;
}

// The data-parallel part: each GPU's curve and the plan, one limit per curve.
void read_per_gpu(const nlohmann::json& j, std::string_view source, PowerProfile& p) {
  p.per_gpu = read_curves(j.at("per_gpu"), source);
  for (const auto& w : j.at("optimal_pl_per_gpu")) {
    const double v = w.get<double>();
    if (!(v > 0) || !std::isfinite(v) || v > kMaxWatts) {
      throw ConfigError(
          fmt::format("{}: optimal_pl_per_gpu has {} W; it must be positive", source, v));
    }
    p.optimal_per_gpu_mw.push_back(w_to_mw(v));
  }
  if (p.optimal_per_gpu_mw.size() != p.per_gpu.size()) {
    throw ConfigError(fmt::format("{}: optimal_pl_per_gpu has {} limits for {} GPU curves", source,
                                  p.optimal_per_gpu_mw.size(), p.per_gpu.size()));
  }
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
  if (!profile.per_gpu.empty()) {
    const nlohmann::json curves = write_curves(profile.per_gpu);
    j["per_gpu"] = curves;
    nlohmann::json plan = nlohmann::json::array();
    for (int64_t mw : profile.optimal_per_gpu_mw) {
      plan.push_back(mw_to_w(mw));
    }
    j["optimal_pl_per_gpu"] = plan;
  }
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
    if (j.contains("per_gpu")) {
      read_per_gpu(j, source, p);
    }
    return p;
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("power profile {} is corrupt ({}); delete it to profile again",
                                  source, e.what()));
  }
}

std::string curves_to_json(std::span<const GpuCurve> curves) {
  return write_curves(curves).dump();
}

std::vector<GpuCurve> curves_from_json(std::string_view text, std::string_view source) {
  try {
    return read_curves(nlohmann::json::parse(text), source);
  } catch (const nlohmann::json::exception& e) {
    throw ConfigError(fmt::format("{}: the per-GPU curves are not valid: {}", source, e.what()));
  }
}

CurvesMatch match_curves(std::span<const GpuCurve> saved, std::span<const CurveOwner> gpus) {
  const auto describe = [](const std::string& uuid, const std::string& host) {
    return host.empty() ? uuid : fmt::format("{} on {}", uuid, host);
  };
  if (saved.empty()) {
    return {std::nullopt,
            "it has no per-GPU curves (written by a job that planned one limit, or by Zeus)"};
  }
  if (!std::all_of(saved.begin(), saved.end(), [](const GpuCurve& c) { return !c.uuid.empty(); })) {
    if (saved.size() != gpus.size()) {
      return {std::nullopt, fmt::format("its {} per-GPU curves are another job's", saved.size())};
    }
    return {std::vector<GpuCurve>(saved.begin(), saved.end()), ""};  // written before UUIDs
  }
  std::vector<GpuCurve> curves;
  std::vector<std::string> missing;
  for (size_t r = 0; r < gpus.size(); ++r) {
    const auto it = std::find_if(saved.begin(), saved.end(), [&](const GpuCurve& c) {
      return c.uuid == gpus[r].uuid && c.host == gpus[r].host;
    });
    if (it == saved.end()) {
      missing.push_back(fmt::format("rank {}'s {}", r, describe(gpus[r].uuid, gpus[r].host)));
    } else {
      curves.push_back(*it);
    }
  }
  if (!missing.empty()) {
    std::vector<std::string> had;
    for (const auto& c : saved) {
      had.push_back(describe(c.uuid, c.host));
    }
    return {std::nullopt, fmt::format("it has no curve of {} (its curves are of {})",
                                      fmt::join(missing, ", "), fmt::join(had, ", "))};
  }
  return {std::move(curves), ""};
}

}  // namespace zeus::optimize
