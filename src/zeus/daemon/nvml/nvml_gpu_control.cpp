#include "zeus/daemon/nvml/nvml_gpu_control.h"

#include <fmt/format.h>

#include "zeus/common/errors.h"

namespace zeus::daemon::nvml {

using device::nvml::check_nvml;
using device::nvml::NvmlApi;

NvmlGpuControl::NvmlGpuControl(device::nvml::NvmlLibraryOptions options)
    : lib_(std::make_unique<device::nvml::NvmlLibrary>(std::move(options))) {
  const NvmlApi& api = lib_->api();
  for (const auto& d : device::nvml::list_devices(*lib_)) {
    Gpu g;
    g.handle = d.handle;
    g.identity.name = d.name;
    if (api.device_get_pci_info != nullptr) {
      nvmlPciInfo_t pci{};
      if (api.device_get_pci_info(g.handle, &pci) == NVML_SUCCESS) {
        // Upstream's format: {:04x}:{:02x}:{:02x}.0
        g.identity.pci_address =
            fmt::format("{:04x}:{:02x}:{:02x}.0", pci.domain, pci.bus, pci.device);
      }
    }
    if (api.device_get_total_energy != nullptr) {
      unsigned long long energy = 0;
      g.identity.energy_available =
          api.device_get_total_energy(g.handle, &energy) != NVML_ERROR_NOT_SUPPORTED;
    }
    if (api.device_get_field_values != nullptr) {
      nvmlFieldValue_t field{};
      field.fieldId = kNvmlFieldPowerInstant;
      g.instant_power = api.device_get_field_values(g.handle, 1, &field) == NVML_SUCCESS &&
                        field.nvmlReturn == NVML_SUCCESS;
    }
    gpus_.push_back(std::move(g));
  }
}

NvmlGpuControl::~NvmlGpuControl() = default;

const NvmlGpuControl::Gpu& NvmlGpuControl::at(int gpu) const {
  if (gpu < 0 || gpu >= count()) {
    throw ConfigError(fmt::format("GPU {} not found", gpu));
  }
  return gpus_[static_cast<size_t>(gpu)];
}

void NvmlGpuControl::check(nvmlReturn_t rc, const char* function, int gpu) const {
  if (rc != NVML_SUCCESS) {
    check_nvml(*lib_, rc, function,
               fmt::format("GPU {} ({})", gpu, gpus_[static_cast<size_t>(gpu)].identity.name));
  }
}

template <typename F>
F NvmlGpuControl::need(F fn, const char* function, int gpu) const {
  if (fn == nullptr) {
    throw NotSupported(fmt::format(
        "{} on GPU {}: this NVML library lacks it (the driver is too old)", function, gpu));
  }
  return fn;
}

GpuIdentity NvmlGpuControl::identity(int gpu) const {
  return at(gpu).identity;
}

uint64_t NvmlGpuControl::energy_mj(int gpu) {
  const Gpu& g = at(gpu);
  unsigned long long mj = 0;
  auto fn = need(lib_->api().device_get_total_energy, "nvmlDeviceGetTotalEnergyConsumption", gpu);
  check(fn(g.handle, &mj), "nvmlDeviceGetTotalEnergyConsumption", gpu);
  return mj;
}

uint32_t NvmlGpuControl::power_mw(int gpu) {
  const Gpu& g = at(gpu);
  if (g.instant_power) {
    nvmlFieldValue_t field{};
    field.fieldId = kNvmlFieldPowerInstant;
    check(lib_->api().device_get_field_values(g.handle, 1, &field), "nvmlDeviceGetFieldValues",
          gpu);
    check(field.nvmlReturn, "nvmlDeviceGetFieldValues(NVML_FI_DEV_POWER_INSTANT)", gpu);
    return field.value.uiVal;
  }
  unsigned int mw = 0;
  check(lib_->api().device_get_power_usage(g.handle, &mw), "nvmlDeviceGetPowerUsage", gpu);
  return mw;
}

uint32_t NvmlGpuControl::power_limit_mw(int gpu) {
  unsigned int mw = 0;
  check(lib_->api().device_get_power_limit(at(gpu).handle, &mw),
        "nvmlDeviceGetPowerManagementLimit", gpu);
  return mw;
}

PowerLimitRange NvmlGpuControl::power_limit_constraints_mw(int gpu) {
  unsigned int lo = 0;
  unsigned int hi = 0;
  check(lib_->api().device_get_power_limit_constraints(at(gpu).handle, &lo, &hi),
        "nvmlDeviceGetPowerManagementLimitConstraints", gpu);
  return {lo, hi};
}

bool NvmlGpuControl::persistence_mode(int gpu) {
  nvmlEnableState_t mode = 0;
  auto fn = need(lib_->api().device_get_persistence_mode, "nvmlDeviceGetPersistenceMode", gpu);
  check(fn(at(gpu).handle, &mode), "nvmlDeviceGetPersistenceMode", gpu);
  return mode != 0;
}

std::vector<pid_t> NvmlGpuControl::compute_pids(int gpu) {
  const auto fn = lib_->api().device_get_compute_running_processes;
  if (fn == nullptr) {
    return {};
  }
  std::vector<nvmlProcessInfo_t> infos(16);
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto n = static_cast<unsigned int>(infos.size());
    const nvmlReturn_t rc = fn(at(gpu).handle, &n, infos.data());
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
      infos.resize(n + 8);  // processes may start between the calls
      continue;
    }
    if (rc == NVML_ERROR_NOT_SUPPORTED) {
      return {};
    }
    check(rc, "nvmlDeviceGetComputeRunningProcesses_v3", gpu);
    std::vector<pid_t> pids;
    for (unsigned k = 0; k < n; ++k) {
      pids.push_back(static_cast<pid_t>(infos[k].pid));
    }
    return pids;
  }
  throw DeviceError(fmt::format("GPU {}: its process list kept growing while read", gpu));
}

void NvmlGpuControl::set_power_limit_mw(int gpu, uint32_t limit_mw) {
  check(lib_->api().device_set_power_limit(at(gpu).handle, limit_mw),
        "nvmlDeviceSetPowerManagementLimit", gpu);
}

void NvmlGpuControl::set_persistence_mode(int gpu, bool enabled) {
  auto fn = need(lib_->api().device_set_persistence_mode, "nvmlDeviceSetPersistenceMode", gpu);
  check(fn(at(gpu).handle, enabled ? 1 : 0), "nvmlDeviceSetPersistenceMode", gpu);
}

void NvmlGpuControl::set_gpu_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) {
  auto fn = need(lib_->api().device_set_gpu_locked_clocks, "nvmlDeviceSetGpuLockedClocks", gpu);
  check(fn(at(gpu).handle, min_mhz, max_mhz), "nvmlDeviceSetGpuLockedClocks", gpu);
}

void NvmlGpuControl::reset_gpu_locked_clocks(int gpu) {
  auto fn = need(lib_->api().device_reset_gpu_locked_clocks, "nvmlDeviceResetGpuLockedClocks", gpu);
  check(fn(at(gpu).handle), "nvmlDeviceResetGpuLockedClocks", gpu);
}

void NvmlGpuControl::set_mem_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) {
  auto fn =
      need(lib_->api().device_set_memory_locked_clocks, "nvmlDeviceSetMemoryLockedClocks", gpu);
  check(fn(at(gpu).handle, min_mhz, max_mhz), "nvmlDeviceSetMemoryLockedClocks", gpu);
}

void NvmlGpuControl::reset_mem_locked_clocks(int gpu) {
  auto fn =
      need(lib_->api().device_reset_memory_locked_clocks, "nvmlDeviceResetMemoryLockedClocks", gpu);
  check(fn(at(gpu).handle), "nvmlDeviceResetMemoryLockedClocks", gpu);
}

}  // namespace zeus::daemon::nvml
