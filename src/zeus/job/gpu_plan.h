// A data-parallel job's per-GPU power limits (optimize/per_gpu_plan.h) as the job keeps them:
// each GPU's curve built from the profiling windows, the plan, and the plan following a GPU
// whose pace changes mid-run. Pure: the job (energy_job.cpp) feeds it what every rank measured
// (the same all-reduced numbers on every rank, so every rank holds the same plan) and carries
// out its limits. GPUs are indexed by global rank.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "zeus/optimize/per_gpu_plan.h"

namespace zeus::job {

struct GpuPlanOptions {
  double eta = 0.5;
  optimize::SelectorOptions selector;
  // A GPU whose steps take this much more or less (relative) than its curve says, at two checks
  // in a row, has changed pace: the plan is made again with its curve stretched.
  double drift_tolerance = 0.05;
};

// Contract: add_window() for every profiling window, then plan() once every GPU has a point;
// after that observe() at each drift check. Throws ConfigError for inconsistent input sizes.
class GpuPlan {
 public:
  // `idle_power_w`: each GPU's power while it waits (one per GPU of the job); `max_limit_mw`:
  // its maximum limit (MAXPOWER's share).
  GpuPlan(std::vector<double> idle_power_w, std::vector<int64_t> max_limit_mw,
          GpuPlanOptions options);

  // One profiling window at `limit_mw` for every GPU: `iterations` steps, the window's time (the
  // slowest rank's), each GPU's own time (no wait) and energy (waits included).
  void add_window(int64_t limit_mw, int64_t iterations, double window_s,
                  std::span<const double> own_s, std::span<const double> energy_j);
  // Curves measured before (the saved profile), instead of windows.
  void load(std::vector<optimize::GpuCurve> curves);

  int gpus() const { return static_cast<int>(curves_.size()); }
  // The curves as profiled (what the profile file keeps).
  const std::vector<optimize::GpuCurve>& curves() const { return curves_; }
  // Makes the plan from the curves (stretched by each GPU's pace): the per-GPU limits, and Zeus's
  // single limit for comparison (none when the GPUs share no limit).
  const optimize::PlanOutcome& plan();
  // Zeus's knob for the next plan() (the grid's signal moves it: optimize/grid_rule.h).
  void set_eta(double eta) { options_.eta = eta; }
  const std::optional<optimize::PlanOutcome>& single() const { return single_; }
  const std::vector<int64_t>& limits_mw() const { return plan_.limits_mw; }
  // The last plan's outcome per step under the model.
  const optimize::PlanOutcome& outcome() const { return plan_; }

  // A drift check: each GPU ran `steps` steps at its planned limit in `own_s` of its own time.
  // Returns why the plan changed (naming the GPUs and their pace) when it did.
  std::optional<std::string> observe(int64_t steps, std::span<const double> own_s);
  // Each GPU's pace against its profile (1: as profiled).
  const std::vector<double>& pace() const { return pace_; }

 private:
  std::vector<optimize::GpuCurve> paced_curves() const;
  double curve_time_s(size_t gpu, int64_t limit_mw) const;

  GpuPlanOptions options_;
  std::vector<optimize::GpuCurve> curves_;
  std::vector<double> pace_;
  std::vector<std::optional<double>> suspect_;  // a pace seen at the last check, not yet confirmed
  optimize::PlanOutcome plan_;
  std::optional<optimize::PlanOutcome> single_;
};

}  // namespace zeus::job
