// The trace-driven simulator of recurring training jobs: the batch-size optimizer (either
// policy) and the JIT power-limit choice (the same optimize/ code the data loader uses) replayed
// over the measured traces, against the Default baseline (the default batch size at the maximum
// power limit) and the best static configuration in hindsight (the oracle).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/optimize/bso_policy.h"
#include "zeus/optimize/power_profile.h"
#include "zeus/sim/workload_model.h"

namespace zeus::sim {

// How a batch size's first, profiled epochs are charged.
enum class Fidelity {
  // Zeus's accounting: one epoch at the mean over the batch size's limits, and the epochs a try
  // may run under the threshold are floor(threshold / cost of an epoch at the chosen limit).
  kZeus,
  // What the profiler really does: warmup + profiling iterations per limit at that limit (a
  // window starts only if it fits in what is left of the epoch; the windows shrink in proportion
  // when an epoch is shorter than one), the rest at the last limit set, then the chosen one; a
  // try stops before the epoch whose cost would reach the threshold, never while profiling.
  kWindows,
};
std::string_view to_string(Fidelity fidelity);
// "zeus" or "windows"; throws ConfigError.
Fidelity parse_fidelity(std::string_view text);

struct SimulationOptions {
  double eta = 0.5;
  double beta = 2.0;
  int recurrences = 0;  // 0: WorkloadModel::default_recurrences()
  uint64_t seed = 1;
  optimize::SelectorOptions selector;
  int max_tries_per_recurrence = 20;
  optimize::BsoPolicy policy = optimize::BsoPolicy::kZeus;
  optimize::LeanOptions lean;
  Fidelity fidelity = Fidelity::kZeus;
  int warmup_iters = 10;  // kWindows only
  int profile_iters = 40;
};

// One try: a run of the job, or a decision that could not afford one epoch (ran = false).
struct TryRecord {
  int recurrence = 0;
  int64_t batch_size = 0;
  int64_t power_limit_w = 0;
  double energy_j = 0;
  double time_s = 0;
  double cost = 0;
  int64_t epochs = 0;
  bool reached = false;
  bool ran = true;
  bool pruning = false;              // chosen in the pruning stage
  double profiling_energy_j = 0;     // energy of its profiled epochs beyond the chosen limit's
  std::optional<int64_t> epoch_cap;  // lean's cap, when one applied
};

struct RecurrenceRecord {
  int64_t batch_size = 0;     // of the try that ended the recurrence
  int64_t power_limit_w = 0;  // its JIT-chosen limit
  double energy_j = 0;        // all tries of the recurrence
  double time_s = 0;
  double cost = 0;
  int tries = 0;
  bool reached = false;
};

struct StaticConfig {
  int64_t batch_size = 0;
  int64_t power_limit_w = 0;
  double energy_j = 0;  // expected per recurrence
  double time_s = 0;
  double cost = 0;
};

struct SimulationResult {
  std::string gpu;
  std::string workload;
  uint64_t seed = 0;
  optimize::BsoPolicy policy = optimize::BsoPolicy::kZeus;
  std::vector<RecurrenceRecord> recurrences;
  std::vector<TryRecord> tries;
  // The simulated policy's (zeus or lean): cumulative, failed and early-stopped tries included.
  double zeus_energy_j = 0;
  double zeus_time_s = 0;
  double zeus_cost = 0;
  StaticConfig baseline;  // per recurrence; cumulative = x recurrences
  double baseline_energy_j = 0;
  double baseline_time_s = 0;
  double baseline_cost = 0;
  double last10_energy_j = 0;  // mean over the last 10 recurrences
  double last10_time_s = 0;
  int64_t final_batch_size = 0;
  int64_t final_power_limit_w = 0;
  StaticConfig oracle;                      // the best static (b, pl) in hindsight
  std::map<int64_t, int64_t> jit_limits_w;  // batch size -> JIT choice

  double energy_savings() const { return 1.0 - zeus_energy_j / baseline_energy_j; }
  double cost_savings() const { return 1.0 - zeus_cost / baseline_cost; }
  double time_change() const { return zeus_time_s / baseline_time_s - 1.0; }
  double last10_energy_savings() const { return 1.0 - last10_energy_j / baseline.energy_j; }
};

// Zeus's JIT choice for every batch size: argmin over the limits measured for it of
// (eta * P + (1 - eta) * MAXPOWER_b) * T_epoch, MAXPOWER_b being that batch size's highest
// measured limit (as Zeus's simulator computes it); ties go to the higher limit.
std::map<int64_t, int64_t> jit_power_limits_w(const WorkloadModel& model, double eta,
                                              const optimize::SelectorOptions& selector);

// Deterministic: the same model, options and seed give bit-identical results. Throws
// ConfigError for bad options, or when the first recurrence cannot reach the target at b0.
SimulationResult simulate(const WorkloadModel& model, const SimulationOptions& options);

}  // namespace zeus::sim
