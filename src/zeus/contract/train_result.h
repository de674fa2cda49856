// The result of one training job: `{job_id}+bs{B}.train.json`. The first five keys are Zeus's
// (energy J, time s, cost, num_epochs, reached), so its users' tooling keeps working; the rest
// are zeus-cpp's additions for `zeus report` and `zeus tune`.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zeus::contract {

// One train + eval epoch, as the global master aggregated it (energy: all GPUs; time: the
// slowest rank).
struct EpochRecord {
  int epoch = 0;
  int64_t train_iterations = 0;  // per rank
  int64_t eval_iterations = 0;
  double train_time_s = 0;
  double eval_time_s = 0;
  double train_energy_j = 0;
  double eval_energy_j = 0;
  std::optional<double> metric;  // what report_metric() got for this epoch
  int64_t power_limit_mw = 0;    // the limit at the end of the epoch
  // Under a grid signal: the epoch's energy in gCO2eq or $ (each stretch between two readings
  // charged the signal read at its start, the power taken as even over the epoch).
  std::optional<double> grid_amount;
};

// A profiling window, for the report's shading: wall-clock UTC nanoseconds since the epoch.
struct WindowRecord {
  int epoch = 0;
  int64_t power_limit_mw = 0;
  int64_t begin_unix_ns = 0;
  int64_t end_unix_ns = 0;
};

// A data-parallel job's per-GPU limits changed after profiling: a GPU's steps took another time
// than its profile said (heat, a neighbour), and the plan followed without profiling again.
struct ReplanRecord {
  int epoch = 0;
  int64_t step = 0;  // train steps of the job so far
  std::string reason;
  std::vector<int64_t> power_limits_mw;  // the new plan, in global rank order
};

// A job whose limit follows the grid: the rule chose again (job/grid_limits.h).
struct GridChoiceRecord {
  int epoch = 0;
  int64_t step = 0;  // train steps of the job so far
  double signal = 0;
  int64_t power_limit_mw = 0;  // the highest when the limits are per GPU
  std::string reason;
  double reference = 0;  // the S_max the rule chose at (the grid's own, or the fixed one)
};

// The grid's signal during a job (ZEUS_CARBON_INTENSITY or ZEUS_ELECTRICITY_PRICE).
struct GridSummary {
  std::string signal;     // "carbon_intensity" or "electricity_price"
  std::string unit;       // of `amount`: "gCO2eq" or "$"
  std::string source;     // the provider
  double signal_max = 0;  // a fixed reference; 0: the grid's own ("signal_max": "grid" in JSON)
  double amount = 0;      // the epochs' grid_amount, summed
  // Estimated from the profile for the steps run after profiling: what following the signal
  // saved against Zeus's fixed choice over the same steps, in `unit` and s (negative: spent
  // more). One limit only (per-GPU plans leave them 0).
  double estimated_saving = 0;
  double estimated_time_saving_s = 0;
  int64_t provider_failures = 0;
  bool followed = false;  // false: measured only (measure-only or observer mode)
  std::vector<GridChoiceRecord> choices;
};

enum class StopReason { kTargetReached, kMaxEpochs, kCostThreshold };
std::string_view to_string(StopReason reason);

struct TrainResult {
  // Zeus's fields.
  double energy_j = 0;  // all GPUs of the job
  double time_s = 0;
  double cost = 0;
  int num_epochs = 0;
  bool reached = false;
  // zeus-cpp's.
  std::string job_id;
  int64_t global_batch_size = 0;
  int world_size = 1;
  int nodes = 1;
  std::string device;
  double eta = 0;
  double max_power_w = 0;  // the cost's MAXPOWER: max limit x GPUs
  double cost_threshold = 0;
  double target_metric = 0;
  StopReason stop_reason = StopReason::kMaxEpochs;
  bool observer_mode = false;
  bool measure_only = false;  // no limit was set: every epoch ran at the GPUs' own limit
  bool profiled = false;      // false: the limits came from a saved bs{B}.power.json
  std::optional<int64_t> optimal_power_limit_mw;
  int64_t max_power_limit_mw = 0;
  // Estimated from the profile for the iterations run after profiling: what running them at the
  // optimal limit saved (observer mode: would have saved) against the maximum limit. A negative
  // time means the optimal limit was slower.
  double estimated_energy_saving_j = 0;
  double estimated_time_saving_s = 0;
  std::vector<EpochRecord> epochs;
  std::vector<WindowRecord> windows;
  // Data-parallel jobs: "per_gpu" (one limit per GPU, power_limits_mw in global rank order, what
  // the GPUs ran at when the job ended), "global" (Zeus's one limit), or "measure_only" (no
  // limit set: power_limits_mw is what a saved profile's per-GPU plan would have set, and the
  // savings are against the limit the GPUs ran at).
  std::string power_limit_plan = "global";
  std::vector<int64_t> power_limits_mw;
  // Estimated from the profile for the iterations run at the per-GPU plan: what it saved against
  // Zeus's one limit (per_gpu only; negative: it spent more).
  double estimated_plan_energy_saving_j = 0;
  double estimated_plan_time_saving_s = 0;
  std::vector<ReplanRecord> replans;
  std::optional<GridSummary> grid;
};

std::string to_json(const TrainResult& result);
// Accepts Zeus's five-key files too. Throws ConfigError naming `source` when malformed.
TrainResult train_result_from_json(std::string_view text, std::string_view source);

// Atomic write; read throws IoError when missing, ConfigError naming the path when corrupt.
void save_train_result(const std::filesystem::path& path, const TrainResult& result);
[[nodiscard]] TrainResult load_train_result(const std::filesystem::path& path);

// The one-line summary the master prints at the end of a job.
std::string summary_line(const TrainResult& result);

}  // namespace zeus::contract
