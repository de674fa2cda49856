#include "zeus/optimize/per_gpu_plan.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <random>
#include <vector>

#include "zeus/common/errors.h"

namespace zeus::optimize {
namespace {

// Two limits a GPU can run at: 200 W (1.0 s, 180 W busy) and 100 W (1.5 s, 100 W busy).
GpuCurve two_limit_gpu(double slowdown, double idle_w = 40) {
  return {{{200'000, 1.0 * slowdown, 180}, {100'000, 1.5 * slowdown, 100}}, idle_w, 200'000};
}

TEST(PerGpuPlan, EvaluateChargesTheWaitAtIdlePower) {
  const std::vector<GpuCurve> curves{two_limit_gpu(1.0), two_limit_gpu(1.0)};
  const CostModel cost = data_parallel_cost(curves, 0.5);
  EXPECT_DOUBLE_EQ(cost.max_power_w(), 400);
  const std::vector<int64_t> limits{200'000, 100'000};
  const PlanOutcome o = evaluate_plan(curves, limits, cost);
  EXPECT_DOUBLE_EQ(o.time_s, 1.5);
  // GPU 0: 180 W x 1 s busy + 40 W x 0.5 s waiting; GPU 1: 100 W x 1.5 s.
  EXPECT_DOUBLE_EQ(o.energy_j, 180 + 20 + 150);
  EXPECT_DOUBLE_EQ(o.cost, 0.5 * 350 + 0.5 * 400 * 1.5);
  const std::vector<int64_t> unknown{200'000, 150'000};
  EXPECT_THROW(evaluate_plan(curves, unknown, cost), InternalError);
}

TEST(PerGpuPlan, TheFastGpuSlowsDownToTheStragglersPace) {
  // GPU 1 is 1.5x slower: at 200 W it takes 1.5 s, which GPU 0 also takes at 100 W.
  const std::vector<GpuCurve> curves{two_limit_gpu(1.0), two_limit_gpu(1.5)};
  const CostModel cost = data_parallel_cost(curves, 0.5);
  const PlanOutcome single = *plan_single_limit(curves, cost, {});
  EXPECT_EQ(single.limits_mw, (std::vector<int64_t>{200'000, 200'000}));
  const PlanOutcome plan = plan_per_gpu(curves, cost, {});
  EXPECT_EQ(plan.limits_mw, (std::vector<int64_t>{100'000, 200'000}));
  EXPECT_DOUBLE_EQ(plan.time_s, single.time_s);
  EXPECT_LT(plan.energy_j, single.energy_j);
}

TEST(PerGpuPlan, EqualGpusGetZeusChoiceIncludingItsTies) {
  // Both limits cost the same per iteration: Zeus takes the higher one, and so does the plan.
  // 200 W: (0.5 x 2 x 100 + 0.5 x 400) x 1 s = 300; 100 W: (0.5 x 2 x P + 200) x 2 s = 300 at P=50.
  const GpuCurve gpu{{{200'000, 1.0, 100}, {100'000, 2.0, 50}}, 30, 200'000};
  const std::vector<GpuCurve> curves(2, gpu);
  const CostModel cost = data_parallel_cost(curves, 0.5);
  const auto job = job_measurements(curves);
  ASSERT_EQ(job.size(), 2u);
  EXPECT_EQ(select_power_limit(job, cost, {}), 200'000);
  EXPECT_EQ(plan_per_gpu(curves, cost, {}).limits_mw, (std::vector<int64_t>{200'000, 200'000}));
  for (const char* s : {"energy", "time", "slowdown:2.5", "slowdown:1.5"}) {
    const SelectorOptions selector = parse_selector(s);
    const int64_t zeus = select_power_limit(job, cost, selector);
    EXPECT_EQ(plan_per_gpu(curves, cost, selector).limits_mw, (std::vector<int64_t>(2, zeus))) << s;
  }
}

TEST(PerGpuPlan, MixedModelsShareOnlyTheirCommonLimits) {
  const std::vector<GpuCurve> curves{{{{300'000, 1.0, 250}, {200'000, 1.2, 180}}, 30, 300'000},
                                     {{{250'000, 1.1, 200}, {200'000, 1.3, 170}}, 40, 250'000}};
  const CostModel cost = data_parallel_cost(curves, 0.5);
  EXPECT_DOUBLE_EQ(cost.max_power_w(), 550);
  EXPECT_EQ(plan_single_limit(curves, cost, {})->limits_mw,
            (std::vector<int64_t>{200'000, 200'000}));
  const std::vector<GpuCurve> disjoint{curves[0], {{{250'000, 1.1, 200}}, 40, 250'000}};
  EXPECT_FALSE(plan_single_limit(disjoint, cost, {}).has_value());
  EXPECT_EQ(plan_per_gpu(disjoint, cost, {}).limits_mw.size(), 2u);
}

// The exact optimum by enumeration, scored as the selector's per-GPU form says, ties to the
// higher limits (larger sum, then lexicographically larger).
PlanOutcome brute_force(const std::vector<GpuCurve>& curves, const CostModel& cost,
                        const SelectorOptions& selector) {
  double bound = 1e300;
  if (selector.selector == LimitSelector::kMaxSlowdown) {
    std::vector<int64_t> top;
    for (const auto& c : curves) {
      int64_t m = 0;
      for (const auto& p : c.points) {
        m = std::max(m, p.limit_mw);
      }
      top.push_back(m);
    }
    bound = selector.max_slowdown * evaluate_plan(curves, top, cost).time_s;
  }
  std::optional<PlanOutcome> best;
  std::vector<int64_t> limits(curves.size());
  const auto key = [&](const PlanOutcome& o) {
    switch (selector.selector) {
      case LimitSelector::kCost:
        return std::pair{o.cost, 0.0};
      case LimitSelector::kTime:
        return std::pair{o.time_s, o.energy_j};
      default:
        return std::pair{o.energy_j, 0.0};
    }
  };
  const auto sum = [](const PlanOutcome& o) {
    int64_t s = 0;
    for (int64_t l : o.limits_mw) {
      s += l;
    }
    return s;
  };
  std::function<void(size_t)> walk = [&](size_t g) {
    if (g == curves.size()) {
      PlanOutcome o = evaluate_plan(curves, limits, cost);
      if (o.time_s > bound * (1 + 1e-12)) {
        return;
      }
      if (!best || key(o) < key(*best) ||
          (key(o) == key(*best) &&
           (sum(o) > sum(*best) || (sum(o) == sum(*best) && o.limits_mw > best->limits_mw)))) {
        best = o;
      }
      return;
    }
    for (const auto& p : curves[g].points) {
      limits[g] = p.limit_mw;
      walk(g + 1);
    }
  };
  walk(0);
  return *best;
}

TEST(PerGpuPlan, MatchesBruteForceOnRandomMixes) {
  std::mt19937_64 rng(41);
  std::uniform_real_distribution<double> u(0.0, 1.0);
  int checked = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const int gpus = 2 + trial % 3;
    std::vector<GpuCurve> curves;
    for (int g = 0; g < gpus; ++g) {
      GpuCurve c;
      c.idle_power_w = 20 + 30 * u(rng);
      const int limits = 2 + static_cast<int>(u(rng) * 4);
      const double speed = 0.8 + 0.6 * u(rng);
      for (int i = 0; i < limits; ++i) {
        const int64_t limit = 300'000 - 25'000 * i;
        // Mostly slower and cheaper at lower limits, with noise so that it is not always so.
        c.points.push_back({limit, speed * (1.0 + 0.15 * i + 0.1 * u(rng)),
                            c.idle_power_w + 20 + 250.0 * (1.0 - 0.15 * i) * (0.8 + 0.4 * u(rng))});
      }
      c.max_limit_mw = 300'000;
      curves.push_back(std::move(c));
    }
    // Every fifth trial, equal GPUs (Zeus's shortcut), and every fifth but one, equal GPUs but
    // one point perturbed by 1e-12 (the exact search): both must be the brute force's.
    if (trial % 5 == 0 || trial % 5 == 1) {
      for (int g = 1; g < gpus; ++g) {
        curves[static_cast<size_t>(g)] = curves.front();
      }
      if (trial % 5 == 1) {
        curves.back().points.front().power_w *= 1 + 1e-12;
      }
    }
    const CostModel cost = data_parallel_cost(curves, u(rng));
    for (const char* s : {"cost", "energy", "time", "slowdown:1.1", "slowdown:1.3"}) {
      const SelectorOptions selector = parse_selector(s);
      const PlanOutcome want = brute_force(curves, cost, selector);
      const PlanOutcome got = plan_per_gpu(curves, cost, selector);
      EXPECT_EQ(got.limits_mw, want.limits_mw) << "trial " << trial << " selector " << s;
      EXPECT_NEAR(got.cost, want.cost, 1e-9 * want.cost) << "trial " << trial << " selector " << s;
      ++checked;
    }
  }
  EXPECT_EQ(checked, 1500);
}

// Issue #52's case: two equal GPUs under slowdown:f, where Zeus's rule (the lowest limit within
// the bound) spends more than a higher limit that also meets it.
TEST(PerGpuPlan, TheSlowdownSelectorIsTheLeastEnergyWithinTheBoundOnEqualGpus) {
  GpuCurve c;
  c.idle_power_w = 50;
  c.max_limit_mw = 300'000;
  // 300 W: 1.00 s at 300 W; 275 W: 1.05 s at 250 W (idle-net 210 J); 250 W: 1.09 s at 245 W
  // (212.6 J): both within 1.1x, the lower limit the costlier.
  c.points = {{300'000, 1.00, 300}, {275'000, 1.05, 250}, {250'000, 1.09, 245}};
  const std::vector<GpuCurve> equal{c, c};
  const CostModel cost = data_parallel_cost(equal, 0.5);
  const SelectorOptions slowdown = parse_selector("slowdown:1.1");
  const PlanOutcome zeus = *plan_single_limit(equal, cost, slowdown);
  EXPECT_EQ(zeus.limits_mw, (std::vector<int64_t>{250'000, 250'000})) << "Zeus's rule";
  const PlanOutcome got = plan_per_gpu(equal, cost, slowdown);
  EXPECT_EQ(got.limits_mw, (std::vector<int64_t>{275'000, 275'000}));
  EXPECT_LT(got.energy_j, zeus.energy_j);
  EXPECT_EQ(got.limits_mw, brute_force(equal, cost, slowdown).limits_mw);
  std::vector<GpuCurve> nearly = equal;
  nearly[1].points[2].power_w *= 1 + 1e-12;
  EXPECT_EQ(plan_per_gpu(nearly, cost, slowdown).limits_mw, got.limits_mw) << "no flip";
  // Where Zeus's choice is the best, equal GPUs keep it (cost, with its ties).
  EXPECT_EQ(plan_per_gpu(equal, cost, parse_selector("cost")).limits_mw,
            plan_single_limit(equal, cost, parse_selector("cost"))->limits_mw);
}

TEST(PerGpuPlan, TheProfileFileKeepsEachGpusCurveAndThePlan) {
  PowerProfile p;
  p.global_batch_size = 256;
  p.train[200'000] = {200'000, 5.0, 400};
  p.optimal_power_limit_mw = 200'000;
  p.per_gpu = {two_limit_gpu(1.0), two_limit_gpu(1.5)};
  p.per_gpu[0].uuid = "GPU-aaaa";
  p.per_gpu[0].host = "node-1";
  p.optimal_per_gpu_mw = {100'000, 200'000};
  const std::string text = to_json(p);
  const PowerProfile back = power_profile_from_json(text, "bs256.power.json");
  EXPECT_EQ(back.per_gpu.size(), 2u);
  for (size_t g = 0; g < 2; ++g) {
    EXPECT_EQ(back.per_gpu[g].idle_power_w, p.per_gpu[g].idle_power_w);
    EXPECT_EQ(back.per_gpu[g].max_limit_mw, p.per_gpu[g].max_limit_mw);
    EXPECT_THAT(back.per_gpu[g].points, ::testing::UnorderedElementsAreArray(p.per_gpu[g].points));
    EXPECT_EQ(back.per_gpu[g].uuid, p.per_gpu[g].uuid) << "whose curve it is";
    EXPECT_EQ(back.per_gpu[g].host, p.per_gpu[g].host);
  }
  EXPECT_EQ(back.optimal_per_gpu_mw, p.optimal_per_gpu_mw);
  // Zeus's keys are unchanged: a file without the per-GPU part reads as before.
  EXPECT_TRUE(power_profile_from_json(
                  to_json(PowerProfile{256, "", p.train, 200'000, {}, {}, {}, {}}), "zeus")
                  .per_gpu.empty());
  std::string bad = text;
  bad.replace(bad.find("\"optimal_pl_per_gpu\""), 20, "\"optimal_pl_per_gpx\"");
  EXPECT_THROW(power_profile_from_json(bad, "bs256.power.json"), ConfigError);
}

}  // namespace
}  // namespace zeus::optimize
