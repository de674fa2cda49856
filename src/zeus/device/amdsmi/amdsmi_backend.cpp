// AMD SMI's entry in the registry (backends.cpp): AMD Instinct and Radeon GPUs through
// libamd_smi, loaded at run time from ROCm's directories.
#include <fmt/format.h>

#include "zeus/common/errors.h"
#include "zeus/device/amdsmi/amdsmi_gpu_set.h"
#include "zeus/device/registry.h"

namespace zeus::device::amdsmi {

namespace {

BackendStatus probe() {
  try {
    AmdsmiGpuSet gpus;
    const AmdsmiLibrary& lib = gpus.library();
    return machine_backend_status("amdsmi", gpus,
                                  fmt::format("AMD SMI {} at {}", lib.version(), lib.path()),
                                  "ROCR_VISIBLE_DEVICES and HIP_VISIBLE_DEVICES");
  } catch (const Error& e) {
    return {"amdsmi", false, e.what()};
  }
}

std::unique_ptr<GpuSet> open(std::string_view locator, const OpenGpuSetOptions& options) {
  if (locator != "amdsmi") {
    throw ConfigError(
        fmt::format("device '{}': the AMD SMI backend takes no arguments (amdsmi)", locator));
  }
  AmdsmiGpuSetOptions o;
  o.respect_visible_devices = options.respect_visible_devices;
  o.machine_indices = options.machine_indices;
  return std::make_unique<AmdsmiGpuSet>(std::move(o));
}

}  // namespace

GpuBackend backend() {
  return {.name = "amdsmi", .syntax = "amdsmi", .machine = true, .probe = probe, .open = open};
}

}  // namespace zeus::device::amdsmi
