// The measured traces of the Zeus paper: for each GPU model, workload, batch size and power
// limit, the time per epoch and the average power (summary_power_<gpu>.csv). Used by the
// simulated GPU and the trace-driven simulator.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace zeus::trace {

// One measured point.
struct PowerTraceRow {
  std::string dataset;
  std::string network;
  std::string optimizer;
  int64_t batch_size = 0;
  int64_t power_limit_w = 0;
  double time_per_epoch_s = 0;
  double average_power_w = 0;
};

// A workload of the Zeus paper and the facts the traces leave out: the optimizer, the default
// batch size b0, the target metric level and epoch limit of the recurring job, and the
// training-set size (to turn time per epoch into time per iteration).
struct Workload {
  std::string_view dataset;
  std::string_view network;
  std::string_view optimizer;
  int64_t default_batch_size;
  int64_t train_samples;
  double target_metric;  // e.g. accuracy 0.6, or WER 40.0 / F1 84.0 as the trace records them
  int64_t max_epochs;
};

// The six workloads of the traces. Throws ConfigError listing them for an unknown name.
const Workload& find_workload(std::string_view dataset);
std::span<const Workload> all_workloads();

// The GPU models with traces: a40, p100, rtx6000, v100.
std::span<const std::string_view> trace_gpu_models();

// What the traces leave out about a GPU model: its name as its driver reports it, and what it
// draws idle (the traces only measure GPUs under load; also its draw while it waits at a
// data-parallel job's gradient sync).
struct GpuModelFacts {
  std::string_view model;
  std::string_view name;
  double idle_power_w;
};
// Throws ConfigError listing the models for an unknown one.
const GpuModelFacts& gpu_model_facts(std::string_view model);

// One GPU of a data-parallel mix: its model and how much slower than its trace it is (1.15: 15%
// slower; a slowdown stretches its step time, not its power).
struct GpuMixEntry {
  std::string model;
  double slowdown = 1.0;

  bool operator==(const GpuMixEntry&) const = default;
};
// Parses "v100,v100*1.15,a40": one entry per GPU. Throws ConfigError naming the entry (an
// unknown model, a slowdown that is not a number > 0, an empty entry).
std::vector<GpuMixEntry> parse_gpu_mix(std::string_view text);
// The list back: "v100,v100*1.15,a40".
std::string format_gpu_mix(std::span<const GpuMixEntry> mix);

// The directory holding the traces: $ZEUS_TRACE_DIR, else the source tree's data/zeus-traces,
// else the installed share/zeus/zeus-traces. Throws IoError naming every place looked at.
std::filesystem::path trace_dir();

// Time and power of one workload at one batch size, as functions of the power limit:
// linear interpolation between measured limits, clamped at the measured ends.
class PowerProfile {
 public:
  // `points` sorted by power limit, at least one.
  explicit PowerProfile(std::vector<PowerTraceRow> points);

  double time_per_epoch_s(double power_limit_w) const;
  double average_power_w(double power_limit_w) const;
  const std::vector<PowerTraceRow>& points() const { return points_; }

 private:
  template <typename F>
  double interpolate(double power_limit_w, F field) const;
  std::vector<PowerTraceRow> points_;
};

class PowerTrace {
 public:
  // Loads and validates one summary_power CSV. Throws IoError/ConfigError naming path and line.
  static PowerTrace load(const std::filesystem::path& csv_path);
  // The same from text; `source` names it in messages.
  static PowerTrace parse(std::string_view text, std::string_view source);
  // Loads summary_power_<gpu>.csv from trace_dir(); throws ConfigError for an unknown model.
  static PowerTrace load_gpu(std::string_view gpu_model);

  const std::vector<PowerTraceRow>& rows() const { return rows_; }
  const std::string& source() const { return source_; }
  // The smallest and largest power limit measured on this GPU (its settable range), in W.
  int64_t min_power_limit_w() const;
  int64_t max_power_limit_w() const;
  // Batch sizes measured for a dataset, ascending.
  std::vector<int64_t> batch_sizes(std::string_view dataset) const;

  // The measured points for (dataset, batch size), using the workload's default optimizer when
  // the trace has several. Throws ConfigError naming the measured batch sizes when absent.
  PowerProfile profile(std::string_view dataset, int64_t batch_size) const;

 private:
  std::string source_;
  std::vector<PowerTraceRow> rows_;
};

}  // namespace zeus::trace
