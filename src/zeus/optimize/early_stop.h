// Cost-threshold early stopping: at each epoch boundary after profiling, predict the cost after
// one more train + eval epoch at the optimal limit, and stop when it would reach the threshold.
#pragma once

#include <cstdint>
#include <limits>

#include "zeus/common/errors.h"
#include "zeus/optimize/cost.h"

namespace zeus::optimize {

struct EpochForecastInputs {
  double energy_so_far_j = 0;  // all GPUs, since the job started
  double time_so_far_s = 0;
  int64_t train_iters_per_epoch = 0;
  int64_t eval_iters_per_epoch = 0;
  double train_throughput_ips = 0;  // at the optimal limit
  double train_power_w = 0;
  double eval_throughput_ips = 0;
  double eval_power_w = 0;
};

struct EpochForecast {
  double next_time_s = 0;  // one train + one eval epoch
  double next_energy_j = 0;
  double cost_so_far = 0;
  double predicted_cost = 0;  // after one more epoch
};

// next_train_s = iters_train / train_tput, next_eval_s = iters_eval / eval_tput,
// next_E = next_train_s * train_power + next_eval_s * eval_power,
// predicted = cost(E_so_far + next_E, T_so_far + next_train_s + next_eval_s).
EpochForecast forecast_next_epoch(const CostModel& cost, const EpochForecastInputs& in);

// Raised on every rank when the next epoch would cost at least the threshold. Carries the
// numbers the result file and the user need.
class CostThresholdExceeded : public Error {
 public:
  CostThresholdExceeded(const EpochForecast& forecast, double energy_j, double time_s,
                        double threshold);
  const EpochForecast& forecast() const { return forecast_; }
  double threshold() const { return threshold_; }

 private:
  EpochForecast forecast_;
  double threshold_;
};

// The one stopping rule: the next epoch would bring the cost to the threshold or above
// (infinity: never).
inline bool reaches_threshold(const EpochForecast& forecast, double threshold) {
  return forecast.predicted_cost >= threshold;
}

// Throws CostThresholdExceeded when reaches_threshold(forecast, threshold).
void check_cost_threshold(const CostModel& cost, const EpochForecastInputs& in, double threshold);

inline constexpr double kNoCostThreshold = std::numeric_limits<double>::infinity();

}  // namespace zeus::optimize
