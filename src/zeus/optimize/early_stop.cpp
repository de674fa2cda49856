#include "zeus/optimize/early_stop.h"

#include <fmt/format.h>

namespace zeus::optimize {

EpochForecast forecast_next_epoch(const CostModel& cost, const EpochForecastInputs& in) {
  ZEUS_ASSERT(in.train_throughput_ips > 0, "train throughput {} must be positive",
              in.train_throughput_ips);
  const double train_s = static_cast<double>(in.train_iters_per_epoch) / in.train_throughput_ips;
  const double eval_s = in.eval_iters_per_epoch > 0
                            ? static_cast<double>(in.eval_iters_per_epoch) / in.eval_throughput_ips
                            : 0.0;
  EpochForecast f;
  f.next_time_s = train_s + eval_s;
  f.next_energy_j = train_s * in.train_power_w + eval_s * in.eval_power_w;
  f.cost_so_far = cost.cost(in.energy_so_far_j, in.time_so_far_s);
  f.predicted_cost =
      cost.cost(in.energy_so_far_j + f.next_energy_j, in.time_so_far_s + f.next_time_s);
  return f;
}

CostThresholdExceeded::CostThresholdExceeded(const EpochForecast& forecast, double energy_j,
                                             double time_s, double threshold)
    : Error(fmt::format(
          "stopping early: after {:.1f} J and {:.1f} s (cost {:.1f}), one more epoch would cost "
          "{:.1f}, at or above the threshold {:.1f} (ZEUS_COST_THRESH); this batch size cannot "
          "pay off",
          energy_j, time_s, forecast.cost_so_far, forecast.predicted_cost, threshold)),
      forecast_(forecast),
      threshold_(threshold) {}

void check_cost_threshold(const CostModel& cost, const EpochForecastInputs& in, double threshold) {
  const EpochForecast f = forecast_next_epoch(cost, in);
  if (reaches_threshold(f, threshold)) {
    throw CostThresholdExceeded(f, in.energy_so_far_j, in.time_so_far_s, threshold);
  }
}

}  // namespace zeus::optimize
