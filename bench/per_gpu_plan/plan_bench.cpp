// Per-GPU power limits against Zeus's single limit and the exact optimum, over the Zeus traces
// (optimize/per_gpu_plan.h, the straggler model): every workload at its default batch size on
// 4 and 8 GPUs of one model with one GPU 5-25% slower, equal GPUs, and pairs of models. The exact
// optimum is brute force over every limit vector. Prints a table per group and a summary; see
// bench/README.md.
//
//   build/bench/bench/per_gpu_plan_bench [--eta 0.5] [--trace-dir DIR]
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#include "zeus/common/power.h"
#include "zeus/optimize/per_gpu_plan.h"
#include "zeus/sim/data_parallel.h"
#include "zeus/trace/power_trace.h"

namespace {

using zeus::optimize::GpuCurve;
using zeus::optimize::PlanOutcome;

// The least cost over every limit vector (ties to the higher limits, as the planner).
PlanOutcome brute_force(const std::vector<GpuCurve>& curves,
                        const zeus::optimize::CostModel& cost) {
  std::vector<int64_t> limits(curves.size());
  std::optional<PlanOutcome> best;
  std::function<void(size_t)> walk = [&](size_t g) {
    if (g == curves.size()) {
      PlanOutcome o = zeus::optimize::evaluate_plan(curves, limits, cost);
      if (!best || o.cost < best->cost) {
        best = std::move(o);
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

struct Row {
  std::string mix;
  std::string workload;
  double energy_saved = 0;  // per-GPU plan vs Zeus's one limit
  double cost_saved = 0;
  double time_saved = 0;
  double gap_to_optimum = 0;  // plan cost / brute force cost - 1
  bool straggler = false;
  bool equal = false;
};

std::string limits_text(const PlanOutcome& o) {
  std::vector<std::string> w;
  for (int64_t mw : o.limits_mw) {
    w.push_back(fmt::format("{}", zeus::mw_to_w(mw)));
  }
  return fmt::format("{}", fmt::join(w, ","));
}

}  // namespace

int main(int argc, char** argv) {
  double eta = 0.5;
  std::filesystem::path trace_dir;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--eta") {
      eta = std::strtod(argv[i + 1], nullptr);
    } else if (flag == "--trace-dir") {
      trace_dir = argv[i + 1];
    }
  }
  if (trace_dir.empty()) {
    trace_dir = zeus::trace::trace_dir();
  }
  std::vector<std::pair<std::vector<zeus::trace::GpuMixEntry>, bool>> mixes;  // (mix, straggler)
  for (const auto model : zeus::trace::trace_gpu_models()) {
    const std::string m(model);
    for (int n : {4, 8}) {
      mixes.push_back(
          {std::vector<zeus::trace::GpuMixEntry>(static_cast<size_t>(n), {m, 1.0}), false});
      for (double s : {1.05, 1.10, 1.15, 1.20, 1.25}) {
        std::vector<zeus::trace::GpuMixEntry> mix(static_cast<size_t>(n), {m, 1.0});
        mix.back().slowdown = s;
        mixes.push_back({mix, true});
      }
    }
  }
  for (const auto* pair :
       {"v100,a40", "v100,v100,a40,a40", "p100,v100", "rtx6000,v100", "a40,a40,a40,v100"}) {
    mixes.push_back({zeus::trace::parse_gpu_mix(pair), false});
  }

  std::vector<Row> rows;
  int skipped = 0;
  const auto t0 = std::chrono::steady_clock::now();
  fmt::print("{:<34} {:<13} {:>24} {:>24} {:>8} {:>8} {:>8} {:>9}\n", "mix", "workload",
             "Zeus's one limit (W)", "per-GPU plan (W)", "energy", "cost", "time", "vs exact");
  for (const auto& [mix, straggler] : mixes) {
    for (const auto& workload : zeus::trace::all_workloads()) {
      std::vector<GpuCurve> curves;
      try {
        curves =
            zeus::sim::trace_curves(mix, workload.dataset, workload.default_batch_size, trace_dir);
      } catch (const std::exception&) {
        ++skipped;  // a model without this workload's default batch size in its trace
        continue;
      }
      const auto cost = zeus::optimize::data_parallel_cost(curves, eta);
      const auto plan = zeus::optimize::plan_per_gpu(curves, cost, {});
      const auto one = zeus::optimize::plan_single_limit(curves, cost, {});
      if (!one) {
        ++skipped;
        continue;
      }
      const auto exact = brute_force(curves, cost);
      Row r{zeus::trace::format_gpu_mix(mix),
            std::string(workload.dataset),
            1 - plan.energy_j / one->energy_j,
            1 - plan.cost / one->cost,
            1 - plan.time_s / one->time_s,
            plan.cost / exact.cost - 1,
            straggler,
            std::all_of(mix.begin(), mix.end(), [&](const auto& e) { return e == mix.front(); })};
      if (r.equal && plan.limits_mw != one->limits_mw) {
        fmt::print("BUG: equal GPUs planned {} against Zeus's {}\n", limits_text(plan),
                   limits_text(*one));
        return 1;
      }
      fmt::print("{:<34} {:<13} {:>24} {:>24} {:>7.1f}% {:>7.1f}% {:>7.1f}% {:>9.1e}\n", r.mix,
                 r.workload, limits_text(*one), limits_text(plan), 100 * r.energy_saved,
                 100 * r.cost_saved, 100 * r.time_saved, r.gap_to_optimum);
      rows.push_back(std::move(r));
    }
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const auto summary = [&](const char* what, const std::function<bool(const Row&)>& take) {
    int n = 0, five = 0, exact = 0, slower = 0;
    double e = 0, c = 0;
    for (const auto& r : rows) {
      if (!take(r)) {
        continue;
      }
      ++n;
      e += r.energy_saved;
      c += r.cost_saved;
      five += r.energy_saved >= 0.05 && r.time_saved >= -1e-12 ? 1 : 0;
      exact += r.gap_to_optimum <= 1e-12 ? 1 : 0;
      slower += r.time_saved < -1e-12 ? 1 : 0;
    }
    fmt::print(
        "{}: {} cases; the exact optimum in {}; mean {:.1f}% less energy and {:.1f}% less cost "
        "than Zeus's one limit; >= 5% less energy at no more time in {}; slower in {}\n",
        what, n, exact, n ? 100 * e / n : 0.0, n ? 100 * c / n : 0.0, five, slower);
  };
  fmt::print("\neta {}; {} cases in {:.1f} s (brute force included); {} skipped (no trace)\n", eta,
             rows.size(), elapsed, skipped);
  summary("straggler (one GPU of 4 or 8 5-25% slower)", [](const Row& r) { return r.straggler; });
  summary("equal GPUs", [](const Row& r) { return r.equal; });
  summary("two models", [](const Row& r) { return !r.straggler && !r.equal; });
  return 0;
}
