// Power limits that follow the grid (Chase's rule on Zeus's profile). For each profiled limit p
// with energy E(p) and time T(p) per iteration:
//   cost(p) = eta * E(p) * S + (1 - eta) * MAXPOWER * S_max * T(p)
// S the signal now (gCO2eq/kWh or $/kWh), S_max the reference (Chase's 750 gCO2eq/kWh).
// Dividing by S_max (a positive factor changes no argmin) gives Zeus's cost with the energy
// weighed by r = S / S_max, which is Zeus's cost at the knob
//   eta' = eta r / (eta r + 1 - eta),
// so every selector and planner of Zeus's cost (select_power_limit, the per-GPU plan) follows the
// grid unchanged, and at S = S_max (r = 1) the choice is Zeus's own, bit for bit.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "zeus/optimize/power_profile.h"

namespace zeus::optimize {

// Zeus's knob under the signal. eta in [0, 1], signal >= 0, signal_max > 0 (ConfigError
// otherwise). Exactly eta when signal == signal_max; 0 when the energy weighs nothing (a free
// joule, or eta = 0).
double grid_eta(double eta, double signal, double signal_max);

// The rule's limit among `measurements` (non-empty); ties go to the higher limit.
int64_t select_grid_limit(std::span<const LimitMeasurement> measurements, double eta,
                          double max_power_w, double signal, double signal_max);

struct GridFollowerOptions {
  double eta = 0.5;
  double max_power_w = 0;  // Zeus's MAXPOWER: the maximum limit x the GPUs, W
  double signal_max = 750;
  // The limit is chosen again this long after the last choice, and whenever the signal moved by
  // more than `relative_change` of the one it was chosen at.
  std::chrono::nanoseconds interval = std::chrono::seconds(1800);
  double relative_change = 0.10;
};

// Follows the signal with the profile a job already has: never profiles again.
// Contract: pure (the caller brings the time and the signal); not thread-safe.
class GridFollower {
 public:
  // measurements: non-empty (Zeus's profile); throws ConfigError for bad options.
  GridFollower(std::vector<LimitMeasurement> measurements, GridFollowerOptions options);

  struct Choice {
    int64_t limit_mw = 0;
    bool changed = false;  // another limit than before
    std::string reason;    // "the first reading", "30 min since the last choice", "... moved 12%"
    double signal = 0;     // the value the rule chose at: the forecast where there was one
  };
  // The signal at `now` (any monotonic clock), and the provider's forecast of its mean over the
  // next interval where it has one (Chase's rule chooses for the interval ahead, so it rules on
  // the forecast then; the 10% test compares it too): a Choice when the rule chose again, else
  // std::nullopt. The first call always chooses.
  std::optional<Choice> observe(double signal, std::chrono::nanoseconds now,
                                std::optional<double> forecast = std::nullopt);

  int64_t limit_mw() const { return limit_mw_; }
  // The signal of the last choice (nullopt before the first).
  std::optional<double> chosen_at() const { return chosen_signal_; }
  // Zeus's fixed choice: the rule at S = S_max.
  int64_t zeus_limit_mw() const { return zeus_limit_mw_; }
  const GridFollowerOptions& options() const { return options_; }
  const std::vector<LimitMeasurement>& measurements() const { return measurements_; }

 private:
  std::vector<LimitMeasurement> measurements_;
  GridFollowerOptions options_;
  int64_t zeus_limit_mw_ = 0;
  int64_t limit_mw_ = 0;
  std::optional<double> chosen_signal_;
  std::chrono::nanoseconds chosen_time_{0};
};

}  // namespace zeus::optimize
