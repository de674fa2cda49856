// `zeus tune`: the recurring-job driver. Each recurrence runs the user's training command with
// the batch size the BatchSizeOptimizer picks (pruning, then Thompson sampling), passing the
// cost threshold and the job's identity in ZEUS_* variables, reads back the train result, and
// feeds the optimizer; a recurrence ends with the first try that reaches the target. Every try
// is one line of DIR/tune-tries.jsonl, so a killed tuner resumes where it stopped.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace zeus::tune {

struct TuneOptions {
  std::vector<int64_t> batch_sizes;
  int64_t default_batch_size = 0;
  int recurrences = 10;
  double eta = 0.5;
  double beta = 2.0;
  uint64_t seed = 1;                 // the optimizer's, and {seed} = seed + recurrence
  int window = 0;                    // Thompson sampling window (0: all observations)
  std::string lr_scaling = "none";   // none | linear | sqrt: {lr} from default_lr
  double default_lr = 0;             // the learning rate at default_batch_size
  int epochs = 0;                    // {epochs}; 0: not substituted
  int max_tries_per_recurrence = 0;  // 0: number of batch sizes + 1
  std::string policy = "zeus";       // the batch-size policy: zeus | lean
  std::string lean;                  // lean's knobs over its defaults ("gamma=1.5,cap=0")
  std::filesystem::path log_dir = "zeus_tune";
  // --server URL: the batch-size service decides (its job `job_id`, shared by every tuner of
  // the job on any machine) instead of the local optimizer; each try is reported to it once.
  // The target goes to the command as ZEUS_TARGET_METRIC and is the service's; the GPUs are
  // the service's GpuConfig (unset: this machine's).
  std::string server_url;
  std::string job_id;
  std::optional<double> target_metric;
  bool lower_is_better = false;
  int gpus = 0;
  std::string gpu_model;
  double gpu_max_power_w = 0;
  std::vector<std::string> command;  // with {bs} {lr} {seed} {epochs} placeholders
  // A stop signal (SIGINT, SIGTERM, SIGHUP) is forwarded to the command's process group; what
  // still runs this much later gets SIGKILL. Longer than zeus run's own grace period (30 s), so
  // a `zeus run` command restores its limits first. Not part of the saved options.
  std::chrono::nanoseconds grace_period = std::chrono::seconds(60);
};

// One run of the command.
struct TuneTry {
  int recurrence = 0;
  int attempt = 0;  // within the recurrence
  int64_t batch_size = 0;
  double lr = 0;
  uint64_t seed = 0;
  std::string job_id;
  double cost_threshold = 0;  // passed as ZEUS_COST_THRESH (infinity: none)
  int exit_code = 0;
  double energy_j = 0;
  double time_s = 0;
  double cost = 0;
  bool reached = false;
  int num_epochs = 0;
  double recurrence_cost = 0;  // for a try that reached: the recurrence's tries' costs summed
  std::string policy;          // "zeus", or "lean (KNOBS)"; empty in files before policies
  int epoch_cap = 0;           // lean's cap, passed as ZEUS_MAX_EPOCHS (0: none)
  int64_t trial_number = 0;    // the service's trial (--server); 0: local
};

// The history lives in contract::kTuneTriesName, the options in contract::kTuneOptionsName.
std::string to_json_line(const TuneTry& t);
TuneTry tune_try_from_json_line(std::string_view line, std::string_view where);
// {} when the file is missing; ConfigError naming file:line for a malformed line.
std::vector<TuneTry> read_tries(const std::filesystem::path& path);

// {lr} for a batch size: default_lr scaled linearly or by the square root of bs / default.
double scaled_lr(const TuneOptions& options, int64_t batch_size);
// The command with {bs} {lr} {seed} {epochs} replaced.
std::vector<std::string> expand_command(const TuneOptions& options, const TuneTry& t);

// The policy a tune run is recorded under: "zeus", or "lean (gamma=...,spread=...)". Throws
// ConfigError for an unknown policy, bad knobs, or knobs without --policy lean.
std::string policy_label(const TuneOptions& options);

// How run_tune() ended when it did not throw: all recurrences done, or stopped by a signal
// (forwarded to the running command; that try is not recorded, the same command resumes).
struct TuneOutcome {
  int stop_signal = 0;  // 0: done
  int recurrence = 0;   // where it stopped (1-based), with a signal
  int attempt = 0;
};

// Runs (or resumes) the recurrences; a log dir is resumed only under the policy it was written
// with. The table of tries goes to `out`. Throws ConfigError for bad options or a log dir that
// holds another run (nothing was run), Error when a try wrote no result or a recurrence never
// reached the target (what ran is recorded, and the same command resumes).
[[nodiscard]] TuneOutcome run_tune(const TuneOptions& options, std::ostream& out);

}  // namespace zeus::tune
