// Per-GPU power limits for synchronous data-parallel training (Note [the straggler model]).
// Every step waits for the slowest GPU, so a GPU that is faster than the slowest one can run at
// a lower limit for free: it would only have waited at the gradient sync. Zeus sets one limit
// for all; this plans one per GPU from each GPU's own measured curve. Pure: no device, no I/O.
//
// Note [the straggler model]: GPU g at limit p takes t_g(p) for its own share of a step (no
// wait) at busy power P_g(p). A step takes T = max_g t_g(p_g); GPU g then waits T - t_g at its
// idle power. Step energy E = sum_g [P_g t_g + idle_g (T - t_g)]; cost = eta E + (1 - eta)
// MAXPOWER T, MAXPOWER the sum of the GPUs' maximum limits (Zeus's max limit x world size when
// the GPUs are equal). Times may be per step or per epoch: the plan does not depend on the unit.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "zeus/optimize/cost.h"
#include "zeus/optimize/power_profile.h"

namespace zeus::optimize {

// A limit per GPU (in the curves' order) and what the model says it does per unit of work.
struct PlanOutcome {
  std::vector<int64_t> limits_mw;
  double energy_j = 0;
  double time_s = 0;
  double cost = 0;
};

// Zeus's cost for these GPUs: MAXPOWER the sum of their maximum limits. Throws ConfigError for
// eta outside [0, 1].
CostModel data_parallel_cost(std::span<const GpuCurve> curves, double eta);

// The model's energy, time and cost of running GPU g at limits_mw[g]. Throws InternalError for a
// limit not on its GPU's curve.
PlanOutcome evaluate_plan(std::span<const GpuCurve> curves, std::span<const int64_t> limits_mw,
                          const CostModel& cost);

// Zeus's choice: one limit for every GPU, among the limits every curve has (their overlap),
// chosen by the selector under the model; on identical curves exactly select_power_limit() over
// the job's measurements (Zeus's profile). std::nullopt when the curves share no limit.
// Ties to the higher limit.
std::optional<PlanOutcome> plan_single_limit(std::span<const GpuCurve> curves,
                                             const CostModel& cost,
                                             const SelectorOptions& selector);

// The exact optimum over every vector of the GPUs' own limits, for the selector's per-GPU form:
//  - cost: least cost; energy: least energy; time: least time, then least energy;
//  - slowdown:f: least energy with T <= f x T(every GPU at its maximum).
// Ties to the higher limits. Identical curves give plan_single_limit()'s choice exactly.
// Cost: O(K log K + K G), K the points of all curves, G the GPUs (Note [planning by step time]).
PlanOutcome plan_per_gpu(std::span<const GpuCurve> curves, const CostModel& cost,
                         const SelectorOptions& selector);

// The curves as Zeus's job-wide measurements (throughput 1 / time, power summed over GPUs) at
// the limits they share; what plan_single_limit() hands select_power_limit() on equal GPUs.
std::vector<LimitMeasurement> job_measurements(std::span<const GpuCurve> curves);

}  // namespace zeus::optimize
