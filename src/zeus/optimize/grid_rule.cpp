#include "zeus/optimize/grid_rule.h"

#include <fmt/format.h>

#include <cmath>

#include "zeus/common/errors.h"
#include "zeus/common/parse.h"

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

double parse_grid_reference(std::string_view text, std::string_view what, bool carbon) {
  if (text == "grid") {
    return kGridReference;
  }
  if (text == "chase" && carbon) {
    return kChaseMaxCarbon;
  }
  const auto v = parse_number<double>(text);
  if (!v || !(*v > 0) || !std::isfinite(*v)) {
    throw ConfigError(fmt::format(
        "{}='{}': expected grid (the grid's own mean over the last day, the default){}, or a "
        "number > 0 ({} at which the choice is Zeus's own)",
        what, text, carbon ? ", chase (Chase's 750 gCO2eq/kWh)" : "",
        carbon ? "gCO2eq/kWh" : "$/kWh"));
  }
  return *v;
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
  if (!(options_.signal_max >= 0) || !std::isfinite(options_.signal_max)) {
    throw ConfigError(fmt::format("the reference {} is not a number > 0", options_.signal_max));
  }
  zeus_limit_mw_ = select_grid_limit(measurements_, options_.eta, options_.max_power_w, 1.0, 1.0);
  limit_mw_ = zeus_limit_mw_;
}

std::optional<GridFollower::Choice> GridFollower::observe(double now_signal,
                                                          std::chrono::nanoseconds now,
                                                          std::optional<double> forecast,
                                                          std::optional<double> reference) {
  const double signal = forecast.value_or(now_signal);
  // The grid's reference where the rule has no fixed one; none known yet: the signal itself,
  // so that the choice is Zeus's until the grid says what its average hour is.
  const double ref = options_.signal_max > 0       ? options_.signal_max
                     : reference && *reference > 0 ? *reference
                                                   : (signal > 0 ? signal : 1.0);
  const double ratio = signal / ref;
  const std::string what =
      (forecast ? fmt::format("{:g} (now {:g}; the next interval's forecast)", signal, now_signal)
                : fmt::format("{:g}", signal)) +
      (options_.signal_max > 0 ? "" : fmt::format(", the grid's reference {:g}", ref));
  std::string reason;
  if (!chosen_signal_) {
    reason = fmt::format("the first reading, {}", what);
  } else if (now - chosen_time_ >= options_.interval) {
    reason = fmt::format("{:g} s since the last choice; now {}",
                         std::chrono::duration<double>(now - chosen_time_).count(), what);
  } else {
    const double before = *chosen_ratio_;
    const double moved =
        before > 0 ? std::abs(ratio - before) / before : (ratio > 0 ? INFINITY : 0.0);
    if (!(moved > options_.relative_change)) {
      return std::nullopt;
    }
    reason = std::isfinite(moved)
                 ? fmt::format("it moved {:.0f}% against the reference, {:g} -> {}", 100 * moved,
                               *chosen_signal_, what)
                 : fmt::format("it moved from 0 to {}", what);
  }
  const int64_t limit =
      select_grid_limit(measurements_, options_.eta, options_.max_power_w, signal, ref);
  Choice choice{limit, limit != limit_mw_, std::move(reason), signal, ref};
  limit_mw_ = limit;
  chosen_signal_ = signal;
  chosen_ratio_ = ratio;
  chosen_time_ = now;
  return choice;
}

}  // namespace zeus::optimize
