// NVML's entry in the registry (backends.cpp): NVIDIA GPUs through libnvidia-ml, loaded at run
// time.
#include <fmt/format.h>

#include "zeus/common/errors.h"
#include "zeus/device/nvml/nvml_gpu_set.h"
#include "zeus/device/registry.h"

namespace zeus::device::nvml {

namespace {

BackendStatus probe() {
  try {
    NvmlGpuSet gpus;
    return machine_backend_status("nvml", gpus, fmt::format("NVML at {}", gpus.library().path()),
                                  "CUDA_VISIBLE_DEVICES");
  } catch (const Error& e) {
    return {"nvml", false, e.what()};
  }
}

std::unique_ptr<GpuSet> open(std::string_view locator, const OpenGpuSetOptions& options) {
  if (locator != "nvml") {
    throw ConfigError(
        fmt::format("device '{}': the NVML backend takes no arguments (nvml)", locator));
  }
  NvmlGpuSetOptions o;
  o.respect_visible_devices = options.respect_visible_devices;
  o.nvml_indices = options.machine_indices;
  return std::make_unique<NvmlGpuSet>(std::move(o));
}

}  // namespace

GpuBackend backend() {
  return {.name = "nvml", .syntax = "nvml", .machine = true, .probe = probe, .open = open};
}

}  // namespace zeus::device::nvml
