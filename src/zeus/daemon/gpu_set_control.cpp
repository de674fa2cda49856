#include "zeus/daemon/gpu_set_control.h"

#include <fmt/format.h>

#include "zeus/common/errors.h"

namespace zeus::daemon {

GpuSetControl::GpuSetControl(device::GpuSet& gpus) : gpus_(gpus) {
  for (int g = 0; g < gpus_.count(); ++g) {
    identities_.push_back(
        {.name = gpus_.name(g), .uuid = gpus_.uuid(g), .pci_address = gpus_.pci_address(g)});
  }
}

GpuIdentity GpuSetControl::identity(int gpu) const {
  if (gpu < 0 || gpu >= count()) {
    throw ConfigError(fmt::format("GPU {} not found", gpu));
  }
  GpuIdentity id = identities_[static_cast<size_t>(gpu)];
  // Asked here, not at start: a backend may first check its counter against power (AMD SMI's
  // 0.5 s), which must not hold the daemon's socket back (clients of a restarted zeusd).
  id.energy_available = gpus_.capabilities(gpu).energy_counter;
  return id;
}

uint64_t GpuSetControl::energy_mj(int gpu) {
  const auto mj = gpus_.energy_mj(gpu);
  if (!mj) {
    throw NotSupported(fmt::format("GPU {} ({}) has no energy counter", gpu, gpus_.name(gpu)));
  }
  return static_cast<uint64_t>(*mj);
}

uint32_t GpuSetControl::power_mw(int gpu) {
  return static_cast<uint32_t>(gpus_.power_mw(gpu));
}

uint32_t GpuSetControl::power_limit_mw(int gpu) {
  return static_cast<uint32_t>(gpus_.power_limit_mw(gpu));
}

PowerLimitRange GpuSetControl::power_limit_constraints_mw(int gpu) {
  return gpus_.power_limit_constraints_mw(gpu);
}

void GpuSetControl::set_power_limit_mw(int gpu, uint32_t limit_mw) {
  gpus_.set_power_limit_mw(gpu, limit_mw);
}

void GpuSetControl::set_persistence_mode(int gpu, bool enabled) {
  gpus_.set_persistence_mode(gpu, enabled);
}

void GpuSetControl::set_gpu_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) {
  gpus_.set_gpu_locked_clocks(gpu, min_mhz, max_mhz);
}

void GpuSetControl::reset_gpu_locked_clocks(int gpu) {
  gpus_.reset_gpu_locked_clocks(gpu);
}

void GpuSetControl::set_mem_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) {
  gpus_.set_mem_locked_clocks(gpu, min_mhz, max_mhz);
}

void GpuSetControl::reset_mem_locked_clocks(int gpu) {
  gpus_.reset_mem_locked_clocks(gpu);
}

}  // namespace zeus::daemon
