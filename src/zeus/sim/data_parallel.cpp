#include "zeus/sim/data_parallel.h"

#include <fmt/format.h>

#include <map>

#include "zeus/common/errors.h"
#include "zeus/common/power.h"

namespace zeus::sim {

std::vector<optimize::GpuCurve> trace_curves(std::span<const trace::GpuMixEntry> mix,
                                             std::string_view dataset, int64_t batch_size,
                                             const std::filesystem::path& trace_dir) {
  std::map<std::string, trace::PowerTrace> traces;  // each model's read once
  std::vector<optimize::GpuCurve> curves;
  for (const auto& gpu : mix) {
    const trace::GpuModelFacts& facts = trace::gpu_model_facts(gpu.model);
    auto it = traces.find(gpu.model);
    if (it == traces.end()) {
      it = traces
               .emplace(gpu.model, trace::PowerTrace::load(
                                       trace_dir / fmt::format("summary_power_{}.csv", gpu.model)))
               .first;
    }
    const trace::PowerProfile profile = it->second.profile(dataset, batch_size);
    optimize::GpuCurve curve;
    curve.idle_power_w = facts.idle_power_w;
    curve.max_limit_mw = w_to_mw(static_cast<double>(it->second.max_power_limit_w()));
    for (const auto& row : profile.points()) {
      curve.points.push_back({w_to_mw(static_cast<double>(row.power_limit_w)),
                              row.time_per_epoch_s * gpu.slowdown, row.average_power_w});
    }
    curves.push_back(std::move(curve));
  }
  return curves;
}

DataParallelComparison compare_plans(std::span<const optimize::GpuCurve> curves, double eta,
                                     const optimize::SelectorOptions& selector) {
  const optimize::CostModel cost = optimize::data_parallel_cost(curves, eta);
  return {optimize::plan_single_limit(curves, cost, selector),
          optimize::plan_per_gpu(curves, cost, selector)};
}

}  // namespace zeus::sim
