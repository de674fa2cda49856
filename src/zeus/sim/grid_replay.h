// Recurring jobs of the paper under a grid signal (`zeus simulate --carbon/--price`): each job
// runs back to back from the trace's first hour, once at Zeus's fixed choice of limit and once
// under the rule that follows the signal (optimize/grid_rule.h), each on its own timeline. The
// signal is the trace's row in force (the trace repeats when the jobs outlast it); the rule looks
// at it when a row begins (as a job's poller would see it) and chooses again on Zeus's profile
// when it moved by more than the threshold or the interval passed. Both policies have the same
// profile (profiling costs both the same, so it is left out of both).
#pragma once

#include <chrono>
#include <cstdint>
#include <vector>

#include "zeus/grid/signal_trace.h"
#include "zeus/sim/workload_model.h"

namespace zeus::sim {

struct GridReplayOptions {
  double eta = 0.5;
  double signal_max = 750;  // S_max of the rule
  std::chrono::nanoseconds interval = std::chrono::seconds(1800);
  double relative_change = 0.10;
  // The rule chooses on the trace's mean over the next interval (a perfect forecast, as Chase's
  // replay of ElectricityMaps' history); false: on the value now.
  bool forecast = true;
  // Jobs per policy; 0: as many as start within the trace's span at Zeus's choice (at least 1).
  int recurrences = 0;
  int64_t batch_size = 0;  // 0: the workload's default (b0)
};

// One policy's run of a job.
struct GridRun {
  double start_s = 0;  // since the trace's first row
  double time_s = 0;
  double energy_j = 0;
  double amount = 0;  // gCO2eq or $
  int limit_changes = 0;
};

struct GridJobRecord {
  GridRun zeus;
  GridRun rule;
  GridRun max_limit;  // the Default: the maximum limit, for context
};

struct GridReplayResult {
  std::string gpu;
  std::string workload;
  int64_t batch_size = 0;
  int64_t epochs = 0;                  // to the target: the median of the runs that reached it
  int64_t zeus_limit_w = 0;            // Zeus's fixed choice
  std::vector<int64_t> rule_limits_w;  // the limits the rule used, ascending
  std::vector<GridJobRecord> jobs;
  GridRun zeus_total() const;
  GridRun rule_total() const;
  GridRun max_limit_total() const;
  // 1 - rule / zeus, of the amount and energy; rule / zeus - 1 of the time.
  double amount_saving() const;
  double energy_saving() const;
  double time_change() const;
};

// Throws ConfigError when the batch size is not in the traces or the options are out of range.
GridReplayResult replay_grid(const WorkloadModel& model, const grid::SignalTrace& trace,
                             const GridReplayOptions& options);

}  // namespace zeus::sim
