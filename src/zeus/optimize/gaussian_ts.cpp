#include "zeus/optimize/gaussian_ts.h"

#include <cmath>
#include <limits>
#include <numeric>

#include "zeus/common/random.h"

namespace zeus::optimize {

GaussianArm fit_gaussian_arm(double prior_mean, double prior_precision,
                             const std::vector<double>& rewards) {
  GaussianArm arm;
  arm.num_observations = static_cast<int64_t>(rewards.size());
  if (rewards.empty()) {
    arm.param_mean = prior_mean;
    arm.param_precision = prior_precision;
    return arm;
  }
  const double n = static_cast<double>(rewards.size());
  const double sum = std::accumulate(rewards.begin(), rewards.end(), 0.0);
  const double mean = sum / n;
  double var = 0;
  for (const double r : rewards) {
    var += (r - mean) * (r - mean);
  }
  var /= n;  // numpy's np.var: the population variance
  if (var == 0.0) {
    arm.param_mean = mean;
    arm.param_precision = std::numeric_limits<double>::infinity();
    arm.reward_precision = std::numeric_limits<double>::infinity();
    return arm;
  }
  arm.reward_precision = 1.0 / var;
  arm.param_precision = prior_precision + n * arm.reward_precision;
  arm.param_mean =
      (prior_precision * prior_mean + arm.reward_precision * sum) / arm.param_precision;
  return arm;
}

double draw_gaussian_arm(const GaussianArm& arm, double spread, std::mt19937_64& rng) {
  if (!std::isfinite(arm.param_precision)) {
    return arm.param_mean;
  }
  double sd = arm.param_precision > 0 ? 1.0 / std::sqrt(arm.param_precision) : 1e12;
  if (arm.param_precision > 0 && spread > 0) {
    sd *= spread;
  }
  return normal(rng, arm.param_mean, sd);
}

}  // namespace zeus::optimize
