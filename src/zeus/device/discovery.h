// Which device backends this machine offers, and opening one by its locator.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/device/cpu_set.h"
#include "zeus/device/gpu_set.h"
#include "zeus/device/sim/sim_gpu_set.h"

namespace zeus::device {

struct BackendStatus {
  std::string backend;  // "nvml", "sim", "rapl"
  bool available = false;
  std::string reason;  // what was found, or why it is unavailable and what to do
};

// Probes NVML (loads the library and counts GPUs) and the simulator (finds the traces).
std::vector<BackendStatus> discover_gpu_backends();
// Probes RAPL under $ZEUS_RAPL_ROOT or /sys/class/powercap.
BackendStatus discover_cpu_backend();

struct OpenGpuSetOptions {
  // Honour CUDA_VISIBLE_DEVICES (NVML). `zeus restore-limits` turns it off to match by UUID.
  bool respect_visible_devices = true;
  // For sim: the clock, and whether GPUs start busy when the state is created.
  sim::SimClock sim_clock = sim::SimClock::kReal;
  bool sim_start_busy = false;
};

// Opens "nvml", "sim:<gpu>[:<workload>[:<bs>]][@state]" or "auto" (NVML when it loads, else a
// ConfigError that quotes NVML's reason and suggests --device sim:v100). Throws ConfigError for
// an unknown locator and the backend's errors otherwise.
[[nodiscard]] std::unique_ptr<GpuSet> open_gpu_set(std::string_view locator,
                                                   const OpenGpuSetOptions& options);

}  // namespace zeus::device
