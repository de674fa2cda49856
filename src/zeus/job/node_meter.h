// What one node's GPUs used: named energy windows (EnergyMonitor: the energy counter, else the
// power integral) and the per-epoch power logs (PowerMonitor, one CSV per GPU, named by the run
// contract), on the local master's owned GPUs. Elsewhere every call is a no-op (0 J, 0 W).
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

#include "zeus/job/job_options.h"
#include "zeus/job/node_gpus.h"

namespace zeus::monitor {
class EnergyMonitor;
class PowerMonitor;
}  // namespace zeus::monitor

namespace zeus::job {

// Contract: made on every rank after NodeGpus, used from one thread. Its construction makes the
// job's log directory on the ranks that write there (the local master: the power logs; the
// global master: the profile and the train result), so that a directory that cannot be made
// fails the job before training, naming the path, not at the first profiling window; it may
// throw, so the caller agrees on it.
class NodeMeter {
 public:
  NodeMeter(const ResolvedJobOptions& options, NodeGpus& gpus);
  ~NodeMeter();
  NodeMeter(const NodeMeter&) = delete;
  NodeMeter& operator=(const NodeMeter&) = delete;

  void begin_window(const char* name);
  // The owned GPUs' energy over the window, J (0 off the local master).
  double end_window(const char* name);
  // The same, GPU by GPU in NodeGpus::owned()'s order (empty off the local master).
  std::vector<double> end_window_per_gpu(const char* name);
  // Samples the owned GPUs' power into bs{B}+e{E}+gpu{g}.power.log until stop_epoch_log().
  void start_epoch_log(int epoch);
  void stop_epoch_log();
  bool epoch_log_running() const { return epoch_log_ != nullptr; }
  // The owned GPUs' power now, W (the progress bar).
  double power_w();

 private:
  std::filesystem::path log_dir_;
  int64_t global_batch_size_;
  std::chrono::nanoseconds monitor_period_;
  NodeGpus& gpus_;
  std::unique_ptr<monitor::EnergyMonitor> energy_;
  std::unique_ptr<monitor::PowerMonitor> epoch_log_;
};

}  // namespace zeus::job
