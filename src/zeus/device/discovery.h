// Which device backends this machine offers, and opening GPUs by locator through the registry
// (registry.h).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/device/cpu_set.h"
#include "zeus/device/gpu_set.h"
#include "zeus/device/registry.h"

namespace zeus::device {

// Probes every registered GPU backend (loads its library and counts GPUs; finds the traces).
std::vector<BackendStatus> discover_gpu_backends();
// Probes the CPU backends (RAPL under $ZEUS_RAPL_ROOT or /sys/class/powercap): the first that
// is available, else the first's reason.
BackendStatus discover_cpu_backend();

// The machine's CPU packages from the first CPU backend that opens; throws the first backend's
// error when none does.
[[nodiscard]] std::unique_ptr<CpuSet> open_cpu_set(const OpenCpuSetOptions& options = {});

// Opens a registered backend by locator ("nvml", "sim:<gpu>[:<workload>[:<bs>]][@state]"), or
// "auto": the first machine backend that opens and shows a GPU (else the first that opened,
// else a ConfigError quoting each backend's reason and suggesting --device sim:v100). A machine
// backend's set is wrapped to make its changes through zeusd when options.zeusd_from_env and
// the environment name a daemon. Throws ConfigError for an unknown locator (listing the
// registered forms) and the backend's errors otherwise.
[[nodiscard]] std::unique_ptr<GpuSet> open_gpu_set(std::string_view locator,
                                                   const OpenGpuSetOptions& options);

}  // namespace zeus::device
