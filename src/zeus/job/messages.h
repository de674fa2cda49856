// The messages an EnergyJob's ranks exchange, typed. Collectives carry vectors of doubles (so
// that job/ needs no libtorch); each message says how it is laid out, encodes a rank's part and
// decodes what came back, so no code indexes a vector by a magic number.
//
// The protocol (Note [job protocol]): every rank calls the same collectives in the same order.
//  1. Construction: rank 0 broadcasts LimitRangeMessage (its GPUs' range; measuring only, the
//     limit they run at). With a batch-size service, rank 0 broadcasts GrantMessage (the trial it
//     was handed). Then the saved power profile is shared (profile_exchange.h).
//  2. Each limit the profiler sets: a barrier before it (every rank's steps so far are settled at
//     the old limit) and after it (no rank steps on at the old limit).
//     Each profiling window: barrier (an all-reduce of one zero) before and after its start;
//     at its end a barrier, then an all-reduce of WindowMessage (each rank's elapsed time, each
//     node's energy).
//  3. Each epoch boundary (next_epoch()): an all-reduce of EpochMessage (each rank's train and
//     eval time, each node's train and eval energy; measuring only, rank 0's limit), then rank
//     0 broadcasts DecisionMessage (go on, or stop and why, with the cost forecast and the
//     epoch's metric).
//  4. Around loop starts and ends: barriers, and agree() where a step may fail (collectives.h).
//  5. Data-parallel jobs planning per GPU (gpu_plan.h): at construction an all-reduce of each
//     GPU's idle power by rank; every sync point's first barrier carries each rank's simulated
//     clock (by rank; zeros on real GPUs), which every simulated rank then idles up to before
//     one more barrier (so a local master reads its node's energy with every wait in it); after
//     the plan, every kDriftCheckSteps train steps a sync point and an all-reduce of each rank's
//     own time since the last check.
// Times are seconds, energies joules, limits milliwatts (exact in a double).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "zeus/common/power.h"
#include "zeus/job/collectives.h"
#include "zeus/optimize/early_stop.h"
#include "zeus/optimize/power_profile.h"

namespace zeus::job {

// 1. Broadcast by rank 0: [min_mw, max_mw, current_mw].
struct LimitRangeMessage {
  PowerLimitRange range;
  int64_t current_limit_mw = 0;  // measure-only: the limit the GPUs run at; 0 otherwise

  static constexpr size_t kSize = 3;
  std::vector<double> encode() const;
  static LimitRangeMessage decode(std::span<const double> v);
};

// 1b. Broadcast by rank 0 in two parts (profile_exchange.h): ProfileHeader [n: the number of
// limits, -1 for no profile], then ProfileMessage: n x [limit_mw, train throughput it/s, train
// power W], then [eval throughput, eval power] (NaN when the profile has no eval measurement).
struct ProfileHeader {
  std::optional<size_t> limits;  // std::nullopt: no saved profile

  static constexpr size_t kSize = 1;
  std::vector<double> encode() const;
  static ProfileHeader decode(std::span<const double> v);
};

struct ProfileMessage {
  static constexpr size_t kPerLimit = 3;
  static size_t size(size_t limits) { return kPerLimit * limits + 2; }
  static std::vector<double> encode(const optimize::PowerProfile& profile);
  // The profile for `global_batch_size` from a message of `limits` limits.
  static optimize::PowerProfile decode(std::span<const double> v, size_t limits,
                                       int64_t global_batch_size);
};

// 1b'. Then, for a profile with per-GPU curves, CurvesHeader [gpus, points of all curves] and
// CurvesMessage: per GPU [idle_w, max_limit_mw, n, n x [limit_mw, time_s, power_w]].
struct CurvesMessage {
  static constexpr size_t kHeaderSize = 2;
  static std::vector<double> header(std::span<const optimize::GpuCurve> curves);
  static size_t size(std::span<const double> header);
  static std::vector<double> encode(std::span<const optimize::GpuCurve> curves);
  // Throws DistError for a body that does not hold what its header said.
  static std::vector<optimize::GpuCurve> decode(std::span<const double> header,
                                                std::span<const double> v);
};

// 1c. With a batch-size service, broadcast by rank 0 before 1b: [global batch size,
// cost threshold (NaN: none), epoch cap (0: none)] (Note [service trial], batch_size_trial.h).
struct GrantMessage {
  int64_t global_batch_size = 0;
  std::optional<double> cost_threshold;
  std::optional<int64_t> epoch_cap;

  static constexpr size_t kSize = 3;
  std::vector<double> encode() const;
  static GrantMessage decode(std::span<const double> v);
};

// 2. All-reduced: [elapsed_s of rank 0 .. rank W-1, node energy_j (local masters add theirs),
// own_s of rank 0 .. W-1 (its steps without the waits at the sync), energy_j of the GPU of rank
// 0 .. W-1 (its node's local master fills it)].
struct WindowMessage {
  double max_elapsed_s = 0;               // the window's time: its slowest rank's
  double energy_j = 0;                    // the job's: all nodes'
  std::vector<double> own_s;              // by global rank
  std::vector<double> rank_gpu_energy_j;  // by global rank (0: a GPU two ranks share)

  struct Part {
    double elapsed_s = 0;
    double own_s = 0;
    double node_energy_j = 0;                          // local masters only
    std::vector<std::pair<int, double>> gpu_energy_j;  // local masters: (its rank, energy)
  };
  // The part of a rank whose node's GPUs (local master: `gpu_j`, in the order of `gpu_ranks`, the
  // rank on each; elsewhere empty) used that energy.
  static Part gather(double elapsed_s, double own_s, std::span<const double> gpu_j,
                     std::span<const int> gpu_ranks);
  // This rank's part, zeros elsewhere.
  static std::vector<double> contribution(const RankInfo& ranks, const Part& part);
  static WindowMessage decode(std::span<const double> v, int world_size);
};

// 1d/5. All-reduced: one value per global rank, each filled by that rank or its node's local
// master (the GPUs' idle power at construction; each rank's own time at a drift check).
std::vector<double> per_rank_slots(const RankInfo& ranks);

// Text in a collective's doubles (one byte a slot, kTextSlot slots a string; a longer one is cut,
// a zero ends it): a GPU's "uuid\nhost" at its rank's (or curve's) place. Write into a zeroed
// vector, sum or broadcast it, read it back.
inline constexpr size_t kTextSlot = 160;
void write_text(std::vector<double>& v, size_t slot, std::string_view text);
std::string read_text(std::span<const double> v, size_t slot);

// 3a. All-reduced: [train_s x W, eval_s x W, train_j, eval_j, master's limit_mw].
struct EpochMessage {
  double train_time_s = 0;  // the slowest rank's
  double eval_time_s = 0;
  double train_energy_j = 0;  // all nodes'
  double eval_energy_j = 0;
  int64_t master_limit_mw = 0;  // measure-only: the limit rank 0's GPUs ran at

  struct Part {
    double train_s = 0;
    double eval_s = 0;
    double node_train_j = 0;  // local masters only
    double node_eval_j = 0;
    int64_t limit_mw = 0;  // rank 0 only, measuring only
  };
  static std::vector<double> contribution(const RankInfo& ranks, const Part& part);
  static EpochMessage decode(std::span<const double> v, int world_size);
};

// 3b. Broadcast by rank 0: [code, next_time_s, next_energy_j, cost_so_far, predicted_cost,
// metric (NaN: none), threshold].
struct DecisionMessage {
  enum class Code { kContinue = 0, kTargetReached = 1, kMaxEpochs = 2, kCostThreshold = 3 };
  Code code = Code::kContinue;
  optimize::EpochForecast forecast;
  std::optional<double> metric;
  // kCostThreshold: the threshold that stopped the job (the job's, or the batch-size service's
  // bound when the service stopped it).
  double threshold = 0;

  static constexpr size_t kSize = 7;
  std::vector<double> encode() const;
  // Throws DistError for a code no rank 0 sends (a corrupted broadcast).
  static DecisionMessage decode(std::span<const double> v);
};

}  // namespace zeus::job
