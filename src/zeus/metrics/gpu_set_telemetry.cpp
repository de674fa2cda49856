#include "zeus/metrics/gpu_set_telemetry.h"

#include <fmt/format.h>

#include "zeus/common/errors.h"

namespace zeus::metrics {

GpuSetTelemetry::GpuSetTelemetry(device::GpuSet& gpus) : gpus_(gpus) {
  for (int i = 0; i < gpus_.count(); ++i) {
    identities_.push_back(
        GpuIdentity{gpus_.machine_index(i), gpus_.uuid(i), gpus_.name(i), gpus_.pci_address(i)});
  }
}

const GpuIdentity& GpuSetTelemetry::identity(int gpu) const {
  if (gpu < 0 || gpu >= count()) {
    throw ConfigError(fmt::format("GPU {} not found in {}", gpu, gpus_.locator()));
  }
  return identities_[static_cast<size_t>(gpu)];
}

GpuReading GpuSetTelemetry::read(int gpu) {
  identity(gpu);
  return gpus_.read(gpu);
}

}  // namespace zeus::metrics
