#include "zeus/device/gpu_set.h"

#include <fmt/format.h>

#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/power.h"

namespace zeus::device {

void GpuSet::check_index(int gpu) const {
  const int n = count();
  if (gpu < 0 || gpu >= n) {
    throw ConfigError(
        n == 0 ? fmt::format("GPU index {} is invalid: {} shows no GPUs to this process", gpu,
                             locator())
               : fmt::format("GPU index {} is out of range: {} shows {} GPU(s) to this process "
                             "(indices 0-{}); check --gpus and CUDA_VISIBLE_DEVICES",
                             gpu, locator(), n, n - 1));
  }
}

void GpuSet::check_limit(int gpu, int64_t limit_mw, PowerLimitRange range) const {
  if (limit_mw < range.min_mw || limit_mw > range.max_mw) {
    throw ConfigError(fmt::format(
        "power limit {} mW is outside {}-{} mW for GPU {} ({}, {}); pass a value in range",
        limit_mw, range.min_mw, range.max_mw, gpu, name(gpu), uuid(gpu)));
  }
}

void GpuSet::validate_power_limit_mw(int gpu, int64_t limit_mw) {
  check_limit(gpu, limit_mw, power_limit_constraints_mw(gpu));
}

int GpuSet::machine_index(int gpu) const {
  check_index(gpu);
  return gpu;
}

std::string GpuSet::pci_address(int gpu) const {
  check_index(gpu);
  return {};
}

std::optional<std::string> GpuSet::mig_parent_uuid(std::string_view /*instance_uuid*/) const {
  return std::nullopt;
}

std::optional<std::string> GpuSet::runtime_visible_devices() const {
  return get_env_set(kEnvCudaVisibleDevices);
}

GpuCapabilities GpuSet::capabilities(int gpu) const {
  GpuCapabilities c;
  c.energy_counter = has_energy_counter(gpu);
  return c;
}

GpuReading GpuSet::read(int gpu) {
  GpuReading r;
  r.power_w = mw_to_w(power_mw(gpu));
  if (const auto energy_mj = this->energy_mj(gpu)) {
    r.energy_j = mj_to_j(*energy_mj);
  }
  r.power_limit_w = mw_to_w(power_limit_mw(gpu));
  const PowerLimitRange range = power_limit_constraints_mw(gpu);
  r.power_limit_min_w = mw_to_w(range.min_mw);
  r.power_limit_max_w = mw_to_w(range.max_mw);
  return r;
}

std::vector<pid_t> GpuSet::compute_pids(int gpu) {
  check_index(gpu);
  return {};
}

namespace {
[[noreturn]] void unsupported(GpuSet& gpus, int gpu, std::string_view call) {
  throw NotSupported(fmt::format("{} is not supported on GPU {} ({}) of {}", call, gpu,
                                 gpus.name(gpu), gpus.locator()));
}
}  // namespace

bool GpuSet::persistence_mode(int gpu) {
  check_index(gpu);
  unsupported(*this, gpu, "reading the persistence mode");
}
void GpuSet::set_persistence_mode(int gpu, bool /*enabled*/) {
  check_index(gpu);
  unsupported(*this, gpu, "setting the persistence mode");
}
void GpuSet::set_gpu_locked_clocks(int gpu, uint32_t /*min_mhz*/, uint32_t /*max_mhz*/) {
  check_index(gpu);
  unsupported(*this, gpu, "locking GPU clocks");
}
void GpuSet::reset_gpu_locked_clocks(int gpu) {
  check_index(gpu);
  unsupported(*this, gpu, "resetting GPU clocks");
}
void GpuSet::set_mem_locked_clocks(int gpu, uint32_t /*min_mhz*/, uint32_t /*max_mhz*/) {
  check_index(gpu);
  unsupported(*this, gpu, "locking memory clocks");
}
void GpuSet::reset_mem_locked_clocks(int gpu) {
  check_index(gpu);
  unsupported(*this, gpu, "resetting memory clocks");
}

}  // namespace zeus::device
