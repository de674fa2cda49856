// A job's power limit following the grid (ZEUS_CARBON_INTENSITY / ZEUS_ELECTRICITY_PRICE): the
// provider read on rank 0's poller thread (grid/poller.h, so a hung or failing one never holds a
// step), its reading shared with every rank at the same steps, the rule's choice on Zeus's
// profile (optimize/grid_rule.h: never profiling again), and what the epochs' energy amounted to
// in gCO2eq or $. Measuring only (or in observer mode) the signal is read and the amounts
// kept, and no limit moves.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "zeus/contract/train_result.h"
#include "zeus/grid/poller.h"
#include "zeus/job/collectives.h"
#include "zeus/job/job_options.h"
#include "zeus/optimize/grid_rule.h"

namespace zeus::job {

// Train steps between two readings once profiling is done (and at every epoch's end).
inline constexpr int64_t kGridCheckSteps = 50;

// Contract: every rank makes it and calls read() at the same steps (its collective matches).
class GridLimits {
 public:
  // Null when the job has no signal. On rank 0, opens the provider: a trace that does not parse
  // throws ConfigError naming it (call inside agree()).
  static std::unique_ptr<GridLimits> make(const ResolvedJobOptions& options,
                                          Collectives& collectives);
  ~GridLimits();

  // Profiling is done: from now on the limit follows the signal on this profile (the job's
  // measurements, Zeus's knob and MAXPOWER in W).
  void follow(std::vector<optimize::LimitMeasurement> profile, double eta, double max_power_w);
  bool following() const { return follower_ != nullptr; }

  // Counts a train step (at `limit_mw`, the one limit, 0 when the limits are per GPU); true when
  // a reading is due.
  bool step(int64_t limit_mw);

  struct Change {
    int64_t limit_mw = 0;  // the rule's single limit
    bool changed = false;  // another single limit than before
    double eta = 0;        // Zeus's knob under the signal (a per-GPU plan is made again at it)
  };
  // Collective: rank 0's reading and its clock (`job_now`, a sync point's reading) on every
  // rank. Returns the rule's choice when it chose again (the interval passed, the signal moved).
  std::optional<Change> read(std::chrono::nanoseconds job_now, int epoch);

  // The epoch that just ended consumed `energy_j`: what it amounted to (nullopt: no reading yet).
  std::optional<double> close_epoch(double energy_j);

  void fill(contract::TrainResult& result) const;
  // "gCO2eq" or "$".
  std::string_view unit() const;

 private:
  GridLimits(const ResolvedGrid& grid, Collectives& collectives,
             std::unique_ptr<grid::SignalPoller> poller);

  ResolvedGrid grid_;
  Collectives& coll_;
  std::unique_ptr<grid::SignalPoller> poller_;  // rank 0 only
  std::string source_;
  std::unique_ptr<optimize::GridFollower> follower_;
  std::vector<optimize::LimitMeasurement> profile_;
  // The signal in force since the last reading, and the stretch of the epoch it covered.
  std::optional<double> held_;
  std::chrono::nanoseconds last_read_{0};
  bool read_once_ = false;
  double epoch_weighted_ = 0;  // signal x s over the epoch's known stretches
  double epoch_known_s_ = 0;
  // Steps at each limit since the last reading (the saving's estimate).
  int64_t steps_since_read_ = 0;
  int64_t steps_ = 0;  // train steps counted, all epochs
  int64_t limit_since_read_ = 0;
  double saving_ = 0;
  double saving_s_ = 0;
  int64_t failures_ = 0;
  std::vector<std::optional<double>> epoch_amounts_;
  std::vector<contract::GridChoiceRecord> choices_;
};

}  // namespace zeus::job
