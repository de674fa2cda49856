#include "zeus/metrics/gpu_set_telemetry.h"

#include <fmt/format.h>

#include "zeus/common/errors.h"

namespace zeus::metrics {

GpuSetTelemetry::GpuSetTelemetry(device::GpuSet& gpus) : gpus_(gpus) {
  for (int i = 0; i < gpus_.count(); ++i) {
    identities_.push_back(GpuIdentity{i, gpus_.uuid(i), gpus_.name(i)});
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
  GpuReading r;
  r.power_w = static_cast<double>(gpus_.power_mw(gpu)) * 1e-3;
  if (const auto energy_mj = gpus_.energy_mj(gpu)) {
    r.energy_j = static_cast<double>(*energy_mj) * 1e-3;
  }
  r.power_limit_w = static_cast<double>(gpus_.power_limit_mw(gpu)) * 1e-3;
  const PowerLimitRange range = gpus_.power_limit_constraints_mw(gpu);
  r.power_limit_min_w = static_cast<double>(range.min_mw) * 1e-3;
  r.power_limit_max_w = static_cast<double>(range.max_mw) * 1e-3;
  return r;
}

}  // namespace zeus::metrics
