#include "zeus/optimize/cost.h"

#include <fmt/format.h>

#include <cmath>

#include "zeus/common/errors.h"

namespace zeus::optimize {

CostModel::CostModel(double eta, double max_power_w) : eta_(eta), max_power_w_(max_power_w) {
  if (!(eta >= 0.0 && eta <= 1.0)) {
    throw ConfigError(fmt::format("eta {} is outside [0, 1] (0: time only, 1: energy only)", eta));
  }
  if (!(max_power_w > 0.0) || !std::isfinite(max_power_w)) {
    throw ConfigError(fmt::format("MAXPOWER {} W must be a positive number of watts", max_power_w));
  }
}

double CostModel::cost(double energy_j, double time_s) const {
  return eta_ * energy_j + (1.0 - eta_) * max_power_w_ * time_s;
}

double CostModel::cost_per_iteration(double power_w, double throughput_ips) const {
  ZEUS_ASSERT(throughput_ips > 0, "throughput {} iterations/s must be positive", throughput_ips);
  return (eta_ * power_w + (1.0 - eta_) * max_power_w_) / throughput_ips;
}

}  // namespace zeus::optimize
