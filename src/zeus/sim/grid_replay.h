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
#include <optional>
#include <vector>

#include "zeus/grid/signal_trace.h"
#include "zeus/sim/workload_model.h"

namespace zeus::sim {

struct GridReplayOptions {
  double eta = 0.5;
  // S_max of the rule: a fixed one (> 0), or optimize::kGridReference (0): the grid's own, the
  // trace's mean over the day before each choice (the trace repeating before its first row, as
  // a provider's history of the day before would show it).
  double signal_max = 0;
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
  // Chase's cost, in the amount's unit: eta x amount + (1 - eta) x MAXPOWER x time charged at the
  // reference in force (what the rule minimizes; Zeus's cost times S_max at a fixed one).
  double cost = 0;
  int limit_changes = 0;
};

struct GridJobRecord {
  GridRun zeus;
  GridRun rule;
  GridRun max_limit;  // the Default: the maximum limit, for context
  // The offline bound (Note [offline bound]): the least cost (`cost`, `time_s`; no amount) any
  // sequence of limits could reach on this job with the whole trace known, from the rule's start.
  GridRun bound;
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
  GridRun bound_total() const;
  // How much of the cost gap between Zeus's fixed limit and the offline bound the rule closes:
  // (zeus - rule) / (zeus - bound) of the cost; std::nullopt where there is no gap.
  std::optional<double> gap_closed() const;
  // 1 - rule / zeus, of the amount and energy; rule / zeus - 1 of the time.
  double amount_saving() const;
  double energy_saving() const;
  double time_change() const;
};

// Note [offline bound]
// How much of the way to the best is the rule's? For each job the bound is the least cost (the
// rule's own: eta x amount + (1 - eta) x MAXPOWER x time at the reference) of its work with the
// whole trace known, from the rule's start (so that both face the same hours; jobs run back to
// back, so the rule's later jobs start a little off Zeus's). For an end time, it is a linear
// program over the time each limit runs in each trace row (every row run through, the work
// done), relaxed to let limits mix within a row, which makes it a lower bound of every sequence
// of limits with that end; it is solved exactly by its dual, max over lambda of
// lambda W + sum_r L_r min_p (c_rp - lambda / T_p) (bisection on its slope). The bound is the
// least over 49 end times from the fastest limit's to the slowest's and the rule's own end: so
// never above the rule, and a lower bound of every policy up to the spacing of those end times.
// Only its cost and end are kept (a mix has no one amount).
//
// Throws ConfigError when the batch size is not in the traces or the options are out of range.
GridReplayResult replay_grid(const WorkloadModel& model, const grid::SignalTrace& trace,
                             const GridReplayOptions& options);

}  // namespace zeus::sim
