// The batch-size optimizer across recurring jobs: prune the batch sizes that cannot reach the
// target (2 rounds, down then up from the default), then Gaussian Thompson sampling over the
// survivors with reward = -cost. Pure and seeded: the same seed and observations give the same
// decisions, so a history file replays to the same state. The policy (bso_policy.h) is `zeus`,
// the paper's algorithm, or `lean`, which adds rules that end wasteful pruning tries sooner.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/optimize/bso_policy.h"
#include "zeus/optimize/gaussian_ts.h"
#include "zeus/optimize/pruning.h"

namespace zeus::optimize {

struct BatchSizeOptimizerOptions {
  std::vector<int64_t> batch_sizes;  // the candidates (any order, no duplicates)
  int64_t default_batch_size = 0;    // b0, one of batch_sizes
  double beta = 2.0;                 // cost threshold = beta * min cost; >= 1
  uint64_t seed = 1;
  int window = 0;  // Thompson sampling uses the last `window` observations per arm; 0: all
  int pruning_rounds = 2;
  int explorations_per_arm = 2;
  BsoPolicy policy = BsoPolicy::kZeus;
  LeanOptions lean;  // used by BsoPolicy::kLean only
};

// The outcome of one try. `cost` is that try's own cost: the Thompson reward is -cost, so a
// batch size is not blamed for the failures of other batch sizes tried before it in the same
// recurrence. `recurrence_cost` is, for a try that reached the target, the cost summed over all
// tries of its recurrence: min_cost (and so the early-stop threshold) uses it; 0 means `cost`.
// `epochs` is how many epochs the try ran (0: unknown, or it never started); lean's epoch cap
// is derived from it, so it is part of the history.
struct BatchSizeObservation {
  int64_t batch_size = 0;
  double cost = 0;
  bool reached = false;
  double recurrence_cost = 0;
  int64_t epochs = 0;
};

std::string to_json_line(const BatchSizeObservation& obs);
// Throws ConfigError naming `where` (file:line) for a malformed line.
BatchSizeObservation observation_from_json_line(std::string_view line, std::string_view where);

// The history file of these lines is contract/bso_history.h's (optimize/ does no file I/O).

// Contract: alternate next_batch_size() and observe() for the same batch size. Not thread-safe.
class BatchSizeOptimizer {
 public:
  // Throws ConfigError for an empty list, a default not in the list, beta < 1, bad window.
  explicit BatchSizeOptimizer(BatchSizeOptimizerOptions options);

  // The batch size to try next (the same value until it is observed).
  int64_t next_batch_size();
  // The most epochs the pending try may run (lean's downward-scan cap), nullopt: the job's own
  // limit. Call after next_batch_size().
  std::optional<int64_t> epoch_cap() const { return pending_cap_; }
  // Records the try of the batch size last returned. Throws ConfigError when it is another batch
  // size, or when the very first try (the default batch size) did not reach the target.
  void observe(const BatchSizeObservation& obs);
  // Rebuilds the state from a history, checking that each decision matches the recorded one.
  void replay(const std::vector<BatchSizeObservation>& history);

  bool pruning() const { return stage_ == Stage::kPruning; }
  int pruning_round() const { return round_; }
  // The batch sizes left for Thompson sampling (set when pruning ends).
  const std::vector<int64_t>& arms() const { return arms_; }
  // Lowest recurrence cost that reached the target so far (infinity before any).
  double min_cost() const { return min_cost_; }
  // beta * min_cost(): the early-stop threshold for the next run.
  double cost_threshold() const;
  // Posterior (mean, variance) of an arm's reward over its (windowed) observations; lean's
  // spread is not applied here (it scales the draw).
  std::optional<std::pair<double, double>> posterior(int64_t batch_size) const;
  const std::vector<BatchSizeObservation>& history() const { return history_; }

 private:
  enum class Stage { kPruning, kThompson };
  bool lean() const { return options_.policy == BsoPolicy::kLean; }
  int64_t thompson_choice();
  // The arm of a batch size with rewards: fitted to its last `window` rewards, flat prior.
  GaussianArm arm(int64_t batch_size) const;

  BatchSizeOptimizerOptions options_;
  PruningRules rules_;  // the pruning walk is optimize/pruning.h's, shared with the server's
  std::mt19937_64 rng_;
  Stage stage_ = Stage::kPruning;
  int round_ = 1;
  std::map<int64_t, std::vector<PruningTry>> pruning_tries_;
  std::optional<int64_t> pending_cap_;
  std::vector<int64_t> arms_;
  std::map<int64_t, std::vector<double>> rewards_;
  std::optional<int64_t> pending_;
  std::vector<BatchSizeObservation> history_;
  double min_cost_;
};

}  // namespace zeus::optimize
