#include "zeus/metrics/gpu_set_telemetry.h"

#include <fmt/format.h>

#include "zeus/common/errors.h"
#include "zeus/common/power.h"

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
  r.power_w = mw_to_w(gpus_.power_mw(gpu));
  if (const auto energy_mj = gpus_.energy_mj(gpu)) {
    r.energy_j = mj_to_j(*energy_mj);
  }
  r.power_limit_w = mw_to_w(gpus_.power_limit_mw(gpu));
  const PowerLimitRange range = gpus_.power_limit_constraints_mw(gpu);
  r.power_limit_min_w = mw_to_w(range.min_mw);
  r.power_limit_max_w = mw_to_w(range.max_mw);
  return r;
}

}  // namespace zeus::metrics
