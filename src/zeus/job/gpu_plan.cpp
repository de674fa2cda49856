#include "zeus/job/gpu_plan.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>

#include "zeus/common/errors.h"
#include "zeus/common/power.h"

namespace zeus::job {

GpuPlan::GpuPlan(std::vector<double> idle_power_w, std::vector<int64_t> max_limit_mw,
                 GpuPlanOptions options)
    : options_(std::move(options)) {
  if (idle_power_w.empty() || idle_power_w.size() != max_limit_mw.size()) {
    throw ConfigError(
        fmt::format("a per-GPU plan needs one idle power and one maximum limit per "
                    "GPU ({} and {} given)",
                    idle_power_w.size(), max_limit_mw.size()));
  }
  for (size_t g = 0; g < idle_power_w.size(); ++g) {
    curves_.push_back({{}, std::max(0.0, idle_power_w[g]), max_limit_mw[g]});
  }
  pace_.assign(curves_.size(), 1.0);
  suspect_.assign(curves_.size(), std::nullopt);
}

// A window's energy holds the GPU's own steps and its waits at the sync (idle power), so its busy
// power is what is left after the waits, over its own time. A GPU never draws less busy than idle
// (measurement noise on a real GPU could say so).
void GpuPlan::add_window(int64_t limit_mw, int64_t iterations, double window_s,
                         std::span<const double> own_s, std::span<const double> energy_j) {
  if (own_s.size() != curves_.size() || energy_j.size() != curves_.size() || iterations <= 0) {
    throw ConfigError(
        fmt::format("a profiling window of {} GPU(s) and {} iterations for a plan of "
                    "{} GPU(s)",
                    own_s.size(), iterations, curves_.size()));
  }
  for (size_t g = 0; g < curves_.size(); ++g) {
    optimize::GpuCurve& c = curves_[g];
    const double own = std::clamp(own_s[g], 1e-9, std::max(window_s, 1e-9));
    const double busy_w =
        std::max(c.idle_power_w, (energy_j[g] - c.idle_power_w * (window_s - own)) / own);
    const optimize::GpuLimitPoint point{limit_mw, own / static_cast<double>(iterations), busy_w};
    auto it = std::find_if(c.points.begin(), c.points.end(),
                           [&](const auto& p) { return p.limit_mw == limit_mw; });
    if (it != c.points.end()) {
      *it = point;  // a limit profiled again (a window cancelled, then redone) keeps the last
    } else {
      c.points.push_back(point);
    }
  }
}

void GpuPlan::load(std::vector<optimize::GpuCurve> curves) {
  if (curves.size() != curves_.size()) {
    throw ConfigError(fmt::format("the saved profile has {} GPU curves for a job of {} GPUs",
                                  curves.size(), curves_.size()));
  }
  curves_ = std::move(curves);
}

std::vector<optimize::GpuCurve> GpuPlan::paced_curves() const {
  std::vector<optimize::GpuCurve> out = curves_;
  for (size_t g = 0; g < out.size(); ++g) {
    for (auto& p : out[g].points) {
      p.time_s *= pace_[g];  // a slower GPU takes longer at every limit, at the same power
    }
  }
  return out;
}

const optimize::PlanOutcome& GpuPlan::plan() {
  for (size_t g = 0; g < curves_.size(); ++g) {
    ZEUS_ASSERT(!curves_[g].points.empty(), "GPU {} has no profiled limit to plan from", g);
  }
  const auto curves = paced_curves();
  const optimize::CostModel cost = optimize::data_parallel_cost(curves, options_.eta);
  plan_ = optimize::plan_per_gpu(curves, cost, options_.selector);
  single_ = optimize::plan_single_limit(curves, cost, options_.selector);
  return plan_;
}

double GpuPlan::curve_time_s(size_t gpu, int64_t limit_mw) const {
  for (const auto& p : curves_[gpu].points) {
    if (p.limit_mw == limit_mw) {
      return p.time_s;
    }
  }
  throw InternalError(
      fmt::format("GPU {} runs at {} W, which its curve lacks", gpu, mw_to_w(limit_mw)));
}

// Note [following a GPU's pace]: after the plan each check compares every GPU's own step time at
// its planned limit with its curve. One check off by more than the tolerance makes the GPU a
// suspect; a second check that agrees with the first (within the tolerance) confirms the new
// pace, so one noisy span does not move the limits. Then the plan is made again from the curves
// stretched by each GPU's pace: no profiling again.
std::optional<std::string> GpuPlan::observe(int64_t steps, std::span<const double> own_s) {
  if (steps <= 0 || own_s.size() != curves_.size() || plan_.limits_mw.empty()) {
    return std::nullopt;
  }
  std::vector<std::string> changed;
  for (size_t g = 0; g < curves_.size(); ++g) {
    const double per_step = own_s[g] / static_cast<double>(steps);
    const double pace = per_step / curve_time_s(g, plan_.limits_mw[g]);
    if (!(pace > 0) || !std::isfinite(pace)) {
      continue;
    }
    if (std::abs(pace / pace_[g] - 1.0) <= options_.drift_tolerance) {
      suspect_[g].reset();
      continue;
    }
    if (suspect_[g] && std::abs(pace / *suspect_[g] - 1.0) <= options_.drift_tolerance) {
      changed.push_back(fmt::format("GPU {} now takes {:.2f}x its profiled step time (was {:.2f}x)",
                                    g, pace, pace_[g]));
      pace_[g] = pace;
      suspect_[g].reset();
    } else {
      suspect_[g] = pace;
    }
  }
  if (changed.empty()) {
    return std::nullopt;
  }
  const std::vector<int64_t> before = plan_.limits_mw;
  plan();
  std::string reason = fmt::format("{}", fmt::join(changed, "; "));
  if (plan_.limits_mw == before) {
    reason += "; the plan stays";
  }
  return reason;
}

}  // namespace zeus::job
