// Data-parallel jobs over the traces: each GPU of a mix (models, slowdowns) as the planner's
// curve per epoch, and Zeus's single limit against the per-GPU plan under the straggler model
// (optimize/per_gpu_plan.h). What `zeus simulate --dp` prints and bench/ measures.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "zeus/optimize/per_gpu_plan.h"
#include "zeus/trace/power_trace.h"

namespace zeus::sim {

// GPU g's curve for one epoch of `dataset` at per-GPU batch size `batch_size`: every limit its
// model's trace measured there, time per epoch x its slowdown, the trace's average power, the
// model's idle power. Traces are read from `trace_dir` (summary_power_<model>.csv). Throws
// ConfigError naming the model and the batch sizes its trace has.
std::vector<optimize::GpuCurve> trace_curves(std::span<const trace::GpuMixEntry> mix,
                                             std::string_view dataset, int64_t batch_size,
                                             const std::filesystem::path& trace_dir);

struct DataParallelComparison {
  std::optional<optimize::PlanOutcome> global;  // Zeus's single limit (none: no shared limit)
  optimize::PlanOutcome per_gpu;                // the plan
};

DataParallelComparison compare_plans(std::span<const optimize::GpuCurve> curves, double eta,
                                     const optimize::SelectorOptions& selector);

}  // namespace zeus::sim
