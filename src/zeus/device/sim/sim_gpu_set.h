// GpuSet of simulated GPUs whose time per iteration and power at each power limit come from
// the Zeus traces, so the whole measure/profile/limit path runs without a GPU.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/device/gpu_set.h"
#include "zeus/device/registry.h"
#include "zeus/trace/power_trace.h"

namespace zeus::device::sim {

using SimClock = device::SimClock;  // registry.h: an option of opening any set

using SimGpuEntry = trace::GpuMixEntry;

struct SimGpuSetOptions {
  std::string gpu_model = "v100";  // a40, p100, rtx6000, v100: every GPU's when `mix` is empty
  // One entry per GPU (sim:v100,v100*1.2): then the GPU count is its length. Empty: gpu_count
  // GPUs of gpu_model, none slowed down.
  std::vector<SimGpuEntry> mix;
  std::string workload = "imagenet";
  std::optional<int64_t> batch_size;  // default: the workload's default batch size
  int gpu_count = 1;
  // When the state file already exists, take its GPU count instead of gpu_count (a process that
  // restores limits from a journal does not know how many GPUs the writer simulated).
  bool gpu_count_from_state = false;
  SimClock clock = SimClock::kVirtual;
  // Shared state file of one node's simulated GPUs (limits, energy, busy flags), so that a
  // limit one process sets slows another process's steps. Empty: state private to this set.
  std::filesystem::path state_path;
  // Whether GPUs start busy (drawing the workload's power) when this set creates the state;
  // `zeus monitor --device sim:...` uses it to show a GPU under load.
  bool start_busy = false;
  // Trace file; empty: summary_power_<gpu_model>.csv in trace::trace_dir().
  std::filesystem::path trace_path;
};

// Parses "sim:<gpu>[*<slowdown>][,<gpu>[*<slowdown>]...][:<workload>[:<batch_size>]][@<state
// file>]". One entry: the GPU count comes from $ZEUS_SIM_GPUS, else from an existing state file,
// else 1 (every GPU that model, slowed down as the entry says). Several: one GPU per entry, in
// order ($ZEUS_SIM_GPUS, when set, must agree). The state file, when not given with '@', from
// $ZEUS_SIM_STATE.
// Throws ConfigError naming the spec and what is accepted.
SimGpuSetOptions parse_sim_spec(std::string_view spec);

namespace detail {
struct SharedState;
}
class SharedStateFile;

// Contract: as GpuSet; in addition run_iterations()/idle() model the GPU's work. In virtual mode
// each GPU has its own clock, advanced by those calls. Setting a limit outside the traces' range
// throws ConfigError, like a real device.
class SimGpuSet final : public GpuSet {
 public:
  explicit SimGpuSet(SimGpuSetOptions options);
  ~SimGpuSet() override;

  std::string locator() const override;
  int count() const override { return options_.gpu_count; }
  std::string name(int gpu) const override;
  std::string uuid(int gpu) const override;
  std::string describe(int gpu) const override;
  int64_t power_mw(int gpu) override;
  bool has_energy_counter(int /*gpu*/) const override { return true; }
  std::optional<int64_t> energy_mj(int gpu) override;
  int64_t power_limit_mw(int gpu) override;
  PowerLimitRange power_limit_constraints_mw(int gpu) override;
  int64_t default_power_limit_mw(int gpu) override;
  void set_power_limit_mw(int gpu, int64_t limit_mw) override;

  // Time of one training iteration at the GPU's current limit.
  std::chrono::nanoseconds iteration_time(int gpu);
  // Runs n iterations (reading the limit before each one, so a limit set meanwhile by another
  // process takes effect) and returns the time they took.
  std::chrono::nanoseconds run_iterations(int gpu, int64_t n);
  // Stays idle for d (virtual: advances the clock at idle power; real: sleeps).
  void idle(int gpu, std::chrono::nanoseconds d);
  // The GPU's clock: virtual time, or the monotonic clock in real mode.
  std::chrono::nanoseconds now(int gpu);
  // Marks the GPU as running the workload (its power is the trace's) or idle.
  void set_busy(int gpu, bool busy);
  // The GPU's slowdown now (in the shared state: another process, or a test standing for heat,
  // may change it mid-run; the next iteration runs at the new pace). Throws ConfigError for a
  // slowdown that is not a finite number > 0.
  double slowdown(int gpu);
  void set_slowdown(int gpu, double slowdown);

  const SimGpuSetOptions& options() const { return options_; }
  int64_t batch_size() const { return batch_size_; }
  // What the GPU draws while it does nothing (and waits at a gradient sync), W.
  double idle_power_w(int gpu) const;
  // The GPU's model ("v100").
  const std::string& model(int gpu) const;
  // What the trace says GPU `gpu` does per iteration at `limit_mw`, before its slowdown: the
  // time and the busy power (the planner's view of the simulator, for tests and the bench).
  std::chrono::nanoseconds trace_iteration_time(int gpu, int64_t limit_mw) const;
  double trace_power_w(int gpu, int64_t limit_mw) const;

 private:
  // One GPU's model: what its trace says and what the trace leaves out.
  struct Model {
    std::string model;
    trace::PowerProfile profile;
    PowerLimitRange range_mw;
    double idle_power_w = 0;
    std::string display_name;
  };

  // Accrues energy up to `now_ns` at the current power (real clock only).
  void settle(int gpu, int64_t now_ns);
  double power_w_locked(int gpu) const;
  std::chrono::nanoseconds iteration_time_locked(int gpu) const;
  const Model& model_of(int gpu) const { return models_[static_cast<size_t>(gpu)]; }
  // The spec's GPU list: "v100" or "v100,v100*1.2".
  std::string mix_text() const;

  SimGpuSetOptions options_;
  std::vector<Model> models_;  // one per GPU
  int64_t batch_size_ = 0;
  int64_t iterations_per_epoch_ = 0;
  std::unique_ptr<SharedStateFile> shared_;
  detail::SharedState* state_ = nullptr;  // shared_'s
};

}  // namespace zeus::device::sim
