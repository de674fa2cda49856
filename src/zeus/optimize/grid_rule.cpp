#include "zeus/optimize/grid_rule.h"

#include <fmt/format.h>

#include <cmath>

#include "zeus/common/errors.h"

namespace zeus::optimize {

double grid_eta(double eta, double signal, double signal_max) {
  if (!(eta >= 0 && eta <= 1)) {
    throw ConfigError(fmt::format("eta {} is outside [0, 1]", eta));
  }
  if (!(signal >= 0) || !std::isfinite(signal)) {
    throw ConfigError(fmt::format("the signal {} is not a number >= 0", signal));
  }
  if (!(signal_max > 0) || !std::isfinite(signal_max)) {
    throw ConfigError(fmt::format("the reference {} is not a number > 0", signal_max));
  }
  if (signal == signal_max) {
    return eta;  // Zeus's own knob, not a rounding of it
  }
  const double weighed = eta * (signal / signal_max);
  const double total = weighed + (1 - eta);
  return total > 0 ? weighed / total : 0.0;
}

int64_t select_grid_limit(std::span<const LimitMeasurement> measurements, double eta,
                          double max_power_w, double signal, double signal_max) {
  const CostModel cost(grid_eta(eta, signal, signal_max), max_power_w);
  return select_power_limit(measurements, cost, SelectorOptions{});
}

GridFollower::GridFollower(std::vector<LimitMeasurement> measurements, GridFollowerOptions options)
    : measurements_(std::move(measurements)), options_(options) {
  if (measurements_.empty()) {
    throw ConfigError("the grid rule needs a power profile with at least one limit");
  }
  if (!(options_.relative_change >= 0)) {
    throw ConfigError(fmt::format("the relative change {} is negative", options_.relative_change));
  }
  if (options_.interval.count() <= 0) {
    throw ConfigError("the grid rule's interval must be positive");
  }
  zeus_limit_mw_ = select_grid_limit(measurements_, options_.eta, options_.max_power_w,
                                     options_.signal_max, options_.signal_max);
  limit_mw_ = zeus_limit_mw_;
}

std::optional<GridFollower::Choice> GridFollower::observe(double now_signal,
                                                          std::chrono::nanoseconds now,
                                                          std::optional<double> forecast) {
  const double signal = forecast.value_or(now_signal);
  const std::string what =
      forecast ? fmt::format("{:g} (now {:g}; the next interval's forecast)", signal, now_signal)
               : fmt::format("{:g}", signal);
  std::string reason;
  if (!chosen_signal_) {
    reason = fmt::format("the first reading, {}", what);
  } else if (now - chosen_time_ >= options_.interval) {
    reason = fmt::format("{:g} s since the last choice; now {}",
                         std::chrono::duration<double>(now - chosen_time_).count(), what);
  } else {
    const double before = *chosen_signal_;
    const double moved =
        before > 0 ? std::abs(signal - before) / before : (signal > 0 ? INFINITY : 0.0);
    if (!(moved > options_.relative_change)) {
      return std::nullopt;
    }
    reason = std::isfinite(moved)
                 ? fmt::format("it moved {:.0f}%, {:g} -> {}", 100 * moved, before, what)
                 : fmt::format("it moved from 0 to {}", what);
  }
  const int64_t limit = select_grid_limit(measurements_, options_.eta, options_.max_power_w, signal,
                                          options_.signal_max);
  Choice choice{limit, limit != limit_mw_, std::move(reason), signal};
  limit_mw_ = limit;
  chosen_signal_ = signal;
  chosen_time_ = now;
  return choice;
}

}  // namespace zeus::optimize
