// Power limits that follow the grid (Chase's rule on Zeus's profile). For each profiled limit p
// with energy E(p) and time T(p) per iteration:
//   cost(p) = eta * E(p) * S + (1 - eta) * MAXPOWER * S_max * T(p)
// S the signal now (gCO2eq/kWh or $/kWh), S_max the reference (Chase's 750 gCO2eq/kWh).
// Dividing by S_max (a positive factor changes no argmin) gives Zeus's cost with the energy
// weighed by r = S / S_max, which is Zeus's cost at the knob
//   eta' = eta r / (eta r + 1 - eta),
// so every selector and planner of Zeus's cost (select_power_limit, the per-GPU plan) follows the
// grid unchanged, and at S = S_max (r = 1) the choice is Zeus's own, bit for bit.
//
// Note [grid reference]
// S_max is the signal at which one is content with Zeus's trade-off. Chase's 750 gCO2eq/kWh sits
// above every hour of most grids, so under it the rule always weighs energy less than Zeus does
// and, on a grid cleaner than 750, emits more carbon than Zeus's fixed choice (9-10% more on the
// project's traces: bench/README.md). The default reference is therefore the grid's own: the
// signal's mean over the last day (the provider's history), else over the next day (its
// forecast), else the mean of the readings so far (grid/poller.h). Then r = 1 on an average
// hour: the limit goes below Zeus's in the hours dirtier than the grid's day and above it in the
// cleaner ones, and on a flat grid it is Zeus's choice exactly. A fixed reference (Chase's 750 by
// the name "chase", or any number) stays available.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
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

// Chase's max_carbon (gCO2eq/kWh), by name "chase".
inline constexpr double kChaseMaxCarbon = 750;
// GridFollowerOptions::signal_max for the grid's own reference (Note [grid reference]).
inline constexpr double kGridReference = 0;

// A reference as a user names it (ZEUS_MAX_CARBON_INTENSITY, ZEUS_MAX_PRICE, --max-signal):
// "grid" (kGridReference), "chase" (kChaseMaxCarbon; a carbon intensity only) or a number > 0.
// Throws ConfigError naming `what` and what it takes otherwise.
double parse_grid_reference(std::string_view text, std::string_view what, bool carbon);

struct GridFollowerOptions {
  double eta = 0.5;
  double max_power_w = 0;  // Zeus's MAXPOWER: the maximum limit x the GPUs, W
  // A fixed S_max (> 0), or kGridReference: each observe() brings the grid's reference.
  double signal_max = kGridReference;
  // The limit is chosen again this long after the last choice, and whenever the signal relative
  // to the reference (r = S / S_max) moved by more than `relative_change` of the one it was
  // chosen at.
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
    double reference = 0;  // the S_max it chose at
  };
  // The signal at `now` (any monotonic clock), and the provider's forecast of its mean over the
  // next interval where it has one (Chase's rule chooses for the interval ahead, so it rules on
  // the forecast then; the 10% test compares it too), and the grid's reference (used with
  // kGridReference; without one, the signal itself: Zeus's choice): a Choice when the rule chose
  // again, else std::nullopt. The first call always chooses.
  std::optional<Choice> observe(double signal, std::chrono::nanoseconds now,
                                std::optional<double> forecast = std::nullopt,
                                std::optional<double> reference = std::nullopt);

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
  std::optional<double> chosen_ratio_;  // S / S_max of the last choice
  std::chrono::nanoseconds chosen_time_{0};
};

}  // namespace zeus::optimize
