#include "zeus/job/node_meter.h"

#include <filesystem>
#include <vector>

#include "zeus/common/directories.h"
#include "zeus/common/power.h"
#include "zeus/contract/run_files.h"
#include "zeus/job/run_dirs.h"
#include "zeus/monitor/energy_monitor.h"
#include "zeus/monitor/power_monitor.h"

namespace zeus::job {

NodeMeter::NodeMeter(const ResolvedJobOptions& options, NodeGpus& gpus)
    : log_dir_(options.log_dir),
      global_batch_size_(options.global_batch_size),
      monitor_period_(options.monitor_period),
      gpus_(gpus) {
  if (gpus_.owns_gpus() || gpus_.ranks().is_master()) {
    make_directory(log_dir_, kLogDirRole);
  }
  if (!gpus_.owns_gpus()) {
    return;
  }
  monitor::EnergyMonitorOptions energy_options{.gpus = gpus_.owned()};
  if (gpus_.simulated()) {
    energy_options.counter_resolution = std::chrono::nanoseconds(0);  // exact, not 100 ms steps
  }
  energy_ = std::make_unique<monitor::EnergyMonitor>(gpus_.gpu_set(), energy_options);
}

NodeMeter::~NodeMeter() = default;

void NodeMeter::begin_window(const char* name) {
  if (energy_) {
    energy_->begin_window(name);
  }
}

double NodeMeter::end_window(const char* name) {
  return energy_ ? energy_->end_window(name).total_energy_j() : 0.0;
}

std::vector<double> NodeMeter::end_window_per_gpu(const char* name) {
  return energy_ ? energy_->end_window(name).gpu_energy_j : std::vector<double>{};
}

void NodeMeter::start_epoch_log(int epoch) {
  if (!gpus_.owns_gpus()) {
    return;
  }
  const RankInfo& ranks = gpus_.ranks();
  std::vector<std::filesystem::path> paths;
  for (size_t k = 0; k < gpus_.owned().size(); ++k) {
    // gpu{g}: g counts the job's GPUs node by node (Zeus names logs by GPU index).
    paths.push_back(log_dir_ / contract::power_log_name({global_batch_size_, epoch,
                                                         ranks.node_rank * ranks.local_world_size +
                                                             static_cast<int>(k)}));
  }
  epoch_log_ = std::make_unique<monitor::PowerMonitor>(
      gpus_.gpu_set(), monitor::PowerMonitorOptions{
                           .gpus = gpus_.owned(), .period = monitor_period_, .csv_paths = paths});
  epoch_log_->start();
}

void NodeMeter::stop_epoch_log() {
  epoch_log_.reset();
}

double NodeMeter::power_w() {
  double w = 0;
  if (gpus_.owns_gpus()) {
    for (int g : gpus_.owned()) {
      w += mw_to_w(gpus_.gpu_set()->power_mw(g));
    }
  }
  return w;
}

}  // namespace zeus::job
