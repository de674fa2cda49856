// Power-limit measurements, the choice of the optimal limit, and the profile's JSON (the
// `bs{B}.power.json` of Zeus: limits in W, throughput in iterations/s, power in W). No files:
// contract/run_files.h names, writes and reads them.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/optimize/cost.h"

namespace zeus::optimize {

// What one power limit did: iterations/s and average power (all GPUs of the job, W).
struct LimitMeasurement {
  int64_t power_limit_mw = 0;
  double throughput_ips = 0;
  double power_w = 0;
};

enum class LimitSelector {
  kCost,         // argmin (eta * P + (1 - eta) * MAXPOWER) / throughput
  kEnergy,       // argmin P / throughput (energy per iteration)
  kTime,         // argmax throughput
  kMaxSlowdown,  // lowest limit whose time per iteration is within max_slowdown x the max limit's
};

struct SelectorOptions {
  LimitSelector selector = LimitSelector::kCost;
  double max_slowdown = 1.1;  // for kMaxSlowdown, >= 1
};

// Parses "cost", "energy", "time", "slowdown:<f>" (e.g. slowdown:1.1). Throws ConfigError.
SelectorOptions parse_selector(std::string_view text);

// The optimal limit among `measurements` (non-empty). Ties go to the higher limit.
int64_t select_power_limit(std::span<const LimitMeasurement> measurements, const CostModel& cost,
                           const SelectorOptions& options);

// One GPU at one limit: its own time for a unit of work (no wait at the gradient sync) and its
// busy power.
struct GpuLimitPoint {
  int64_t limit_mw = 0;
  double time_s = 0;
  double power_w = 0;

  bool operator==(const GpuLimitPoint&) const = default;
};

// One GPU's curve (per_gpu_plan.h): the limits profiled for it (any order, distinct, at least
// one), its power while it waits at the sync, and its maximum settable limit (for MAXPOWER).
struct GpuCurve {
  std::vector<GpuLimitPoint> points;
  double idle_power_w = 0;
  int64_t max_limit_mw = 0;
  // Whose curve it is: the GPU's UUID and the host it is in ("" in profiles written before they
  // were kept). A rerun finds its GPUs' curves by them, not by rank.
  std::string uuid;
  std::string host;

  bool operator==(const GpuCurve&) const = default;
};

// The result of profiling one global batch size.
struct PowerProfile {
  int64_t global_batch_size = 0;
  std::string job_id;
  std::map<int64_t, LimitMeasurement> train;  // by limit (mW)
  int64_t optimal_power_limit_mw = 0;
  std::optional<double> eval_throughput_ips;  // at the optimal limit
  std::optional<double> eval_power_w;
  // zeus-cpp's, for data-parallel jobs: each GPU's own curve (time per iteration without the
  // wait at the gradient sync), in the writing job's global rank order with each GPU's UUID and
  // host, and the per-GPU plan made from them.
  // Empty when the job planned one limit (or ran on one GPU).
  std::vector<GpuCurve> per_gpu;
  std::vector<int64_t> optimal_per_gpu_mw;
};

std::string to_json(const PowerProfile& profile);
// Throws ConfigError naming `source` and the problem when the text is not a valid profile.
PowerProfile power_profile_from_json(std::string_view text, std::string_view source);

// The profile's "per_gpu" array alone, as JSON text (Zeus 0.16's Python profile file carries it
// under a key of its own) and back; throws as power_profile_from_json.
std::string curves_to_json(std::span<const GpuCurve> curves);
std::vector<GpuCurve> curves_from_json(std::string_view text, std::string_view source);

// A GPU as a profile names its curve: its UUID and host.
struct CurveOwner {
  std::string uuid;
  std::string host;
};

// The saved curves of `gpus` (a job's GPUs by rank), found by UUID and host; a profile written
// before those were kept, by rank where it has as many. `why_not` says otherwise: no curves (a job
// that planned one limit wrote it, or Zeus), another job's count, or the GPUs it lacks.
struct CurvesMatch {
  std::optional<std::vector<GpuCurve>> curves;
  std::string why_not;
};
CurvesMatch match_curves(std::span<const GpuCurve> saved, std::span<const CurveOwner> gpus);

}  // namespace zeus::optimize
