// The one cost of Zeus: cost(E, T) = eta * E + (1 - eta) * MAXPOWER * T, in joules and seconds
// with MAXPOWER in watts, so both terms are joules. (The original implementation mixed mW and W
// here and so always chose the fastest power limit; the tests pin the units.)
#pragma once

namespace zeus::optimize {

class CostModel {
 public:
  // eta in [0, 1]: 0 cares only about time, 1 only about energy. max_power_w: the maximum power
  // limit of one GPU in W times the number of GPUs in the job (> 0). Throws ConfigError naming
  // the value and the accepted range.
  CostModel(double eta, double max_power_w);

  double eta() const { return eta_; }
  double max_power_w() const { return max_power_w_; }

  // Cost of a run that used energy_j joules (all GPUs) over time_s seconds.
  double cost(double energy_j, double time_s) const;
  // Cost of one iteration at average power power_w (all GPUs) and throughput_ips iterations/s:
  // (eta * P + (1 - eta) * MAXPOWER) / throughput.
  double cost_per_iteration(double power_w, double throughput_ips) const;

 private:
  double eta_;
  double max_power_w_;
};

}  // namespace zeus::optimize
