#include "zeus/optimize/per_gpu_plan.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "zeus/common/errors.h"
#include "zeus/common/power.h"

namespace zeus::optimize {

namespace {

void check_curves(std::span<const GpuCurve> curves) {
  ZEUS_ASSERT(!curves.empty(), "no GPU curves to plan over");
  for (size_t g = 0; g < curves.size(); ++g) {
    ZEUS_ASSERT(!curves[g].points.empty(), "GPU {} has no profiled limit", g);
    for (const auto& p : curves[g].points) {
      ZEUS_ASSERT(p.time_s > 0 && std::isfinite(p.time_s) && std::isfinite(p.power_w),
                  "GPU {} at {} mW: bad point {} s, {} W", g, p.limit_mw, p.time_s, p.power_w);
    }
  }
}

const GpuLimitPoint& point_at(const GpuCurve& curve, int64_t limit_mw, size_t gpu) {
  for (const auto& p : curve.points) {
    if (p.limit_mw == limit_mw) {
      return p;
    }
  }
  throw InternalError(fmt::format("GPU {} was not profiled at {} W", gpu, mw_to_w(limit_mw)));
}

// The limits every curve has, descending.
std::vector<int64_t> shared_limits(std::span<const GpuCurve> curves) {
  std::set<int64_t> shared;
  for (const auto& p : curves.front().points) {
    shared.insert(p.limit_mw);
  }
  for (const auto& c : curves.subspan(1)) {
    std::set<int64_t> mine;
    for (const auto& p : c.points) {
      if (shared.contains(p.limit_mw)) {
        mine.insert(p.limit_mw);
      }
    }
    shared = std::move(mine);
  }
  return {shared.rbegin(), shared.rend()};
}

bool same_value(double a, double b) {
  return std::abs(a - b) <= 1e-12 * std::max(std::abs(a), std::abs(b));
}

// What the selector's per-GPU form minimizes, compared lexicographically.
struct Score {
  double first = 0;
  double second = 0;
};

Score score(const PlanOutcome& o, LimitSelector selector) {
  switch (selector) {
    case LimitSelector::kCost:
      return {o.cost, 0};
    case LimitSelector::kTime:
      return {o.time_s, o.energy_j};
    default:  // energy, and slowdown within its time bound
      return {o.energy_j, 0};
  }
}

int64_t limit_sum(const PlanOutcome& o) {
  return std::accumulate(o.limits_mw.begin(), o.limits_mw.end(), int64_t{0});
}

// Whether `a` beats `b`: a lower score, or the same score at higher limits.
// Whether a scores better than b on the selector's values alone (no tie-break).
bool scores_better(const PlanOutcome& a, const PlanOutcome& b, LimitSelector selector) {
  const Score sa = score(a, selector);
  const Score sb = score(b, selector);
  if (!same_value(sa.first, sb.first)) {
    return sa.first < sb.first;
  }
  return !same_value(sa.second, sb.second) && sa.second < sb.second;
}

bool better(const PlanOutcome& a, const PlanOutcome& b, LimitSelector selector) {
  const Score sa = score(a, selector);
  const Score sb = score(b, selector);
  if (!same_value(sa.first, sb.first)) {
    return sa.first < sb.first;
  }
  if (!same_value(sa.second, sb.second)) {
    return sa.second < sb.second;
  }
  if (limit_sum(a) != limit_sum(b)) {
    return limit_sum(a) > limit_sum(b);
  }
  return a.limits_mw > b.limits_mw;
}

}  // namespace

CostModel data_parallel_cost(std::span<const GpuCurve> curves, double eta) {
  double max_power_w = 0;
  for (const auto& c : curves) {
    max_power_w += mw_to_w(c.max_limit_mw);
  }
  return {eta, max_power_w};
}

PlanOutcome evaluate_plan(std::span<const GpuCurve> curves, std::span<const int64_t> limits_mw,
                          const CostModel& cost) {
  check_curves(curves);
  ZEUS_ASSERT(limits_mw.size() == curves.size(), "{} limits for {} GPUs", limits_mw.size(),
              curves.size());
  PlanOutcome out;
  out.limits_mw.assign(limits_mw.begin(), limits_mw.end());
  std::vector<const GpuLimitPoint*> at;
  for (size_t g = 0; g < curves.size(); ++g) {
    at.push_back(&point_at(curves[g], limits_mw[g], g));
    out.time_s = std::max(out.time_s, at.back()->time_s);
  }
  for (size_t g = 0; g < curves.size(); ++g) {
    out.energy_j +=
        at[g]->power_w * at[g]->time_s + curves[g].idle_power_w * (out.time_s - at[g]->time_s);
  }
  out.cost = cost.cost(out.energy_j, out.time_s);
  return out;
}

std::vector<LimitMeasurement> job_measurements(std::span<const GpuCurve> curves) {
  check_curves(curves);
  // Any CostModel will do: only energy and time are read.
  const CostModel unit(1.0, 1.0);
  std::vector<LimitMeasurement> out;
  for (int64_t limit : shared_limits(curves)) {
    const std::vector<int64_t> all(curves.size(), limit);
    const PlanOutcome o = evaluate_plan(curves, all, unit);
    out.push_back({limit, 1.0 / o.time_s, o.energy_j / o.time_s});
  }
  return out;
}

std::optional<PlanOutcome> plan_single_limit(std::span<const GpuCurve> curves,
                                             const CostModel& cost,
                                             const SelectorOptions& selector) {
  const std::vector<LimitMeasurement> job = job_measurements(curves);
  if (job.empty()) {
    return std::nullopt;
  }
  const int64_t limit = select_power_limit(job, cost, selector);
  const std::vector<int64_t> all(curves.size(), limit);
  return evaluate_plan(curves, all, cost);
}

// Note [planning by step time]: fix a bound T* on the step time. Every GPU then runs
// independently of the others: the step energy is sum_g (P_g - idle_g) t_g + T sum_g idle_g, so
// each GPU takes, among its limits with t_g <= T*, the one of least (P_g - idle_g) t_g, which
// minimizes the energy and never raises the time. The optimum's own step time is one of the
// t_g(p); trying each as T* therefore finds it, whatever the selector (each is monotone in
// energy and time).
namespace {

PlanOutcome exact_plan(std::span<const GpuCurve> curves, const CostModel& cost,
                       const SelectorOptions& selector) {
  double bound_s = std::numeric_limits<double>::infinity();
  if (selector.selector == LimitSelector::kMaxSlowdown) {
    std::vector<int64_t> fastest;
    for (const auto& c : curves) {
      fastest.push_back(
          std::max_element(c.points.begin(), c.points.end(), [](const auto& a, const auto& b) {
            return a.limit_mw < b.limit_mw;
          })->limit_mw);
    }
    bound_s = selector.max_slowdown * evaluate_plan(curves, fastest, cost).time_s;
  }
  std::vector<double> candidates;
  for (const auto& c : curves) {
    for (const auto& p : c.points) {
      candidates.push_back(p.time_s);
    }
  }
  std::sort(candidates.begin(), candidates.end());
  candidates.erase(std::unique(candidates.begin(), candidates.end()), candidates.end());

  std::optional<PlanOutcome> best;
  std::vector<int64_t> limits(curves.size());
  for (double t_star : candidates) {
    if (t_star > bound_s && best) {
      break;  // the slowdown bound (never below the fastest plan, which is always kept)
    }
    bool feasible = true;
    for (size_t g = 0; g < curves.size() && feasible; ++g) {
      const GpuLimitPoint* pick = nullptr;
      double pick_j = 0;
      for (const auto& p : curves[g].points) {
        if (p.time_s > t_star) {
          continue;
        }
        const double j = (p.power_w - curves[g].idle_power_w) * p.time_s;
        if (pick == nullptr || j < pick_j || (j == pick_j && p.limit_mw > pick->limit_mw)) {
          pick = &p;
          pick_j = j;
        }
      }
      feasible = pick != nullptr;
      if (feasible) {
        limits[g] = pick->limit_mw;
      }
    }
    if (!feasible) {
      continue;
    }
    PlanOutcome o = evaluate_plan(curves, limits, cost);
    if (!best || better(o, *best, selector.selector)) {
      best = std::move(o);
    }
  }
  ZEUS_ASSERT(best.has_value(), "no feasible plan over {} GPU curves", curves.size());
  return *best;
}

}  // namespace

// Equal GPUs get Zeus's choice, by Zeus's arithmetic (and its ties), wherever it scores as well
// as the exact plan. Where it is not, the exact plan: Zeus's `slowdown:f` takes the lowest
// limit within the bound, which need not be the least energy within it (issue #52: [250, 250] at
// 425.1 J where [275, 275] met the bound at 416.0 J; a curve perturbed by 1e-12 flipped the
// answer), so every selector is exact and equal curves answer as nearly equal ones do.
PlanOutcome plan_per_gpu(std::span<const GpuCurve> curves, const CostModel& cost,
                         const SelectorOptions& selector) {
  check_curves(curves);
  PlanOutcome exact = exact_plan(curves, cost, selector);
  // Equal as curves: the GPUs' identities (uuid, host) differ and do not count.
  const auto same_curve = [&](const GpuCurve& c) {
    const GpuCurve& f = curves.front();
    return c.points == f.points && c.idle_power_w == f.idle_power_w &&
           c.max_limit_mw == f.max_limit_mw;
  };
  if (std::all_of(curves.begin(), curves.end(), same_curve)) {
    if (auto same = plan_single_limit(curves, cost, selector);
        same && !scores_better(exact, *same, selector.selector)) {
      return *same;
    }
  }
  return exact;
}

}  // namespace zeus::optimize
