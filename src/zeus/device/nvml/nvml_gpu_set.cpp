#include "zeus/device/nvml/nvml_gpu_set.h"

#include <fmt/format.h>

#include <array>
#include <cstdlib>

#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"

namespace zeus::device::nvml {
NvmlGpuSet::NvmlGpuSet(NvmlGpuSetOptions options)
    : lib_(std::make_unique<NvmlLibrary>(options.library)) {
  const NvmlApi& api = lib_->api();
  const std::vector<NvmlDevice> devices = list_devices(*lib_);
  const auto count = static_cast<unsigned int>(devices.size());
  std::vector<Gpu> all(count);
  std::vector<std::string> uuids(count);
  const MigParentLookup mig = [this](std::string_view m) { return mig_parent_uuid(m); };
  for (unsigned int i = 0; i < count; ++i) {
    Gpu& g = all[i];
    g.nvml_index = static_cast<int>(i);
    g.handle = devices[i].handle;
    g.uuid = devices[i].uuid;
    g.name = devices[i].name;
    uuids[i] = g.uuid;
  }

  std::vector<int> visible;
  if (options.nvml_indices) {
    for (const int index : *options.nvml_indices) {
      if (index < 0 || index >= static_cast<int>(count)) {
        throw ConfigError(
            fmt::format("NVML GPU {} does not exist: this machine has {} GPU(s)", index, count));
      }
      visible.push_back(index);
    }
  } else if (options.respect_visible_devices) {
    std::optional<std::string> cvd = options.visible_devices;
    if (!cvd) {
      cvd = get_env_set(kEnvCudaVisibleDevices);
    }
    std::vector<std::string> ignored;
    visible = map_visible_devices(cvd, uuids, &ignored, mig);
    for (const auto& note : ignored) {
      logger().warn("CUDA_VISIBLE_DEVICES='{}': ignoring {}, as CUDA does", *cvd, note);
    }
  } else {
    visible = map_visible_devices(std::nullopt, uuids);
  }

  for (const int index : visible) {
    Gpu g = all[static_cast<size_t>(index)];
    // Probe the optional readings once; a GPU that answers NOT_SUPPORTED keeps the fallback.
    if (api.device_get_field_values != nullptr) {
      std::array<nvmlFieldValue_t, 2> fields{};
      fields[0].fieldId = kNvmlFieldPowerInstant;
      fields[1].fieldId = kNvmlFieldThrottlePowerNs;
      if (api.device_get_field_values(g.handle, 2, fields.data()) == NVML_SUCCESS) {
        g.can.instant_power = fields[0].nvmlReturn == NVML_SUCCESS;
        g.can.throttle_counters = fields[1].nvmlReturn == NVML_SUCCESS;
      }
    }
    if (api.device_get_total_energy != nullptr) {
      unsigned long long energy = 0;
      g.can.energy_counter = api.device_get_total_energy(g.handle, &energy) == NVML_SUCCESS;
    }
    g.can.clocks = api.device_set_gpu_locked_clocks != nullptr;
    g.can.persistence = api.device_get_persistence_mode != nullptr;
    g.can.temperature = api.device_get_temperature != nullptr;
    gpus_.push_back(std::move(g));
  }
}

NvmlGpuSet::~NvmlGpuSet() = default;

std::optional<std::string> NvmlGpuSet::mig_parent_uuid(std::string_view mig_uuid) const {
  const NvmlApi& api = lib_->api();
  if (api.device_get_handle_by_uuid == nullptr ||
      api.device_get_device_handle_from_mig_device_handle == nullptr) {
    return std::nullopt;  // an old driver: only the legacy MIG-GPU-... spelling resolves
  }
  nvmlDevice_t mig = nullptr;
  if (api.device_get_handle_by_uuid(std::string(mig_uuid).c_str(), &mig) != NVML_SUCCESS) {
    return std::nullopt;
  }
  nvmlDevice_t parent = nullptr;
  if (api.device_get_device_handle_from_mig_device_handle(mig, &parent) != NVML_SUCCESS) {
    return std::nullopt;  // not a MIG handle
  }
  std::array<char, kNvmlDeviceUuidBufferSize> uuid{};
  check_nvml(*lib_, api.device_get_uuid(parent, uuid.data(), uuid.size()), "nvmlDeviceGetUUID",
             fmt::format("the GPU holding MIG instance {}", mig_uuid));
  return std::string(uuid.data());
}

const NvmlGpuSet::Gpu& NvmlGpuSet::gpu_at(int gpu) const {
  check_index(gpu);
  return gpus_[static_cast<size_t>(gpu)];
}

std::string NvmlGpuSet::where(int gpu) const {
  const Gpu& g = gpus_[static_cast<size_t>(gpu)];
  return fmt::format("GPU {} ({}, {}, NVML index {})", gpu, g.uuid, g.name, g.nvml_index);
}

std::string NvmlGpuSet::name(int gpu) const {
  return gpu_at(gpu).name;
}
std::string NvmlGpuSet::uuid(int gpu) const {
  return gpu_at(gpu).uuid;
}

std::string NvmlGpuSet::describe(int gpu) const {
  const Gpu& g = gpu_at(gpu);
  return fmt::format("NVML index {}; power: {}; energy: {}", g.nvml_index,
                     g.can.instant_power ? "instantaneous (field 186)"
                                         : "nvmlDeviceGetPowerUsage (a 1 s average on recent GPUs)",
                     g.can.energy_counter ? "hardware counter" : "integrated from power samples");
}

std::string NvmlGpuSet::pci_address(int gpu) const {
  const Gpu& g = gpu_at(gpu);
  if (lib_->api().device_get_pci_info == nullptr) {
    return {};
  }
  nvmlPciInfo_t pci{};
  if (lib_->api().device_get_pci_info(g.handle, &pci) != NVML_SUCCESS) {
    return {};
  }
  // Upstream's format: {:04x}:{:02x}:{:02x}.0
  return fmt::format("{:04x}:{:02x}:{:02x}.0", pci.domain, pci.bus, pci.device);
}

GpuCapabilities NvmlGpuSet::capabilities(int gpu) const {
  return gpu_at(gpu).can;
}

int64_t NvmlGpuSet::power_mw(int gpu) {
  const Gpu& g = gpu_at(gpu);
  const NvmlApi& api = lib_->api();
  if (g.can.instant_power) {
    nvmlFieldValue_t field{};
    field.fieldId = kNvmlFieldPowerInstant;
    check_nvml(*lib_, api.device_get_field_values(g.handle, 1, &field), "nvmlDeviceGetFieldValues",
               where(gpu));
    check_nvml(*lib_, field.nvmlReturn, "nvmlDeviceGetFieldValues(POWER_INSTANT)", where(gpu));
    const std::optional<double> mw = field_value(field);
    if (!mw) {
      throw DeviceError(fmt::format("nvmlDeviceGetFieldValues on {}: unknown value type {}",
                                    where(gpu), field.valueType));
    }
    return static_cast<int64_t>(*mw);
  }
  unsigned int mw = 0;
  check_nvml(*lib_, api.device_get_power_usage(g.handle, &mw), "nvmlDeviceGetPowerUsage",
             where(gpu));
  return mw;
}

bool NvmlGpuSet::has_energy_counter(int gpu) const {
  return gpu_at(gpu).can.energy_counter;
}

std::optional<int64_t> NvmlGpuSet::energy_mj(int gpu) {
  const Gpu& g = gpu_at(gpu);
  if (!g.can.energy_counter) {
    return std::nullopt;
  }
  unsigned long long mj = 0;
  check_nvml(*lib_, lib_->api().device_get_total_energy(g.handle, &mj),
             "nvmlDeviceGetTotalEnergyConsumption", where(gpu));
  return static_cast<int64_t>(mj);
}

int64_t NvmlGpuSet::power_limit_mw(int gpu) {
  unsigned int mw = 0;
  check_nvml(*lib_, lib_->api().device_get_power_limit(gpu_at(gpu).handle, &mw),
             "nvmlDeviceGetPowerManagementLimit", where(gpu));
  return mw;
}

PowerLimitRange NvmlGpuSet::power_limit_constraints_mw(int gpu) {
  unsigned int min_mw = 0;
  unsigned int max_mw = 0;
  check_nvml(*lib_,
             lib_->api().device_get_power_limit_constraints(gpu_at(gpu).handle, &min_mw, &max_mw),
             "nvmlDeviceGetPowerManagementLimitConstraints", where(gpu));
  return {min_mw, max_mw};
}

int64_t NvmlGpuSet::default_power_limit_mw(int gpu) {
  unsigned int mw = 0;
  check_nvml(*lib_, lib_->api().device_get_default_power_limit(gpu_at(gpu).handle, &mw),
             "nvmlDeviceGetPowerManagementDefaultLimit", where(gpu));
  return mw;
}

void NvmlGpuSet::set_power_limit_mw(int gpu, int64_t limit_mw) {
  validate_power_limit_mw(gpu, limit_mw);
  check_nvml(
      *lib_,
      lib_->api().device_set_power_limit(gpu_at(gpu).handle, static_cast<unsigned int>(limit_mw)),
      "nvmlDeviceSetPowerManagementLimit", where(gpu));
}

template <typename F>
F NvmlGpuSet::need(F fn, const char* function, int gpu) const {
  gpu_at(gpu);  // the index is checked before where() names it
  if (fn == nullptr) {
    throw NotSupported(fmt::format("{} on {}: this NVML library lacks it (the driver is too old)",
                                   function, where(gpu)));
  }
  return fn;
}

bool NvmlGpuSet::persistence_mode(int gpu) {
  nvmlEnableState_t mode = 0;
  auto fn = need(lib_->api().device_get_persistence_mode, "nvmlDeviceGetPersistenceMode", gpu);
  check_nvml(*lib_, fn(gpu_at(gpu).handle, &mode), "nvmlDeviceGetPersistenceMode", where(gpu));
  return mode != 0;
}

void NvmlGpuSet::set_persistence_mode(int gpu, bool enabled) {
  auto fn = need(lib_->api().device_set_persistence_mode, "nvmlDeviceSetPersistenceMode", gpu);
  check_nvml(*lib_, fn(gpu_at(gpu).handle, enabled ? 1 : 0), "nvmlDeviceSetPersistenceMode",
             where(gpu));
}

void NvmlGpuSet::set_gpu_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) {
  auto fn = need(lib_->api().device_set_gpu_locked_clocks, "nvmlDeviceSetGpuLockedClocks", gpu);
  check_nvml(*lib_, fn(gpu_at(gpu).handle, min_mhz, max_mhz), "nvmlDeviceSetGpuLockedClocks",
             where(gpu));
}

void NvmlGpuSet::reset_gpu_locked_clocks(int gpu) {
  auto fn = need(lib_->api().device_reset_gpu_locked_clocks, "nvmlDeviceResetGpuLockedClocks", gpu);
  check_nvml(*lib_, fn(gpu_at(gpu).handle), "nvmlDeviceResetGpuLockedClocks", where(gpu));
}

void NvmlGpuSet::set_mem_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) {
  auto fn =
      need(lib_->api().device_set_memory_locked_clocks, "nvmlDeviceSetMemoryLockedClocks", gpu);
  check_nvml(*lib_, fn(gpu_at(gpu).handle, min_mhz, max_mhz), "nvmlDeviceSetMemoryLockedClocks",
             where(gpu));
}

void NvmlGpuSet::reset_mem_locked_clocks(int gpu) {
  auto fn =
      need(lib_->api().device_reset_memory_locked_clocks, "nvmlDeviceResetMemoryLockedClocks", gpu);
  check_nvml(*lib_, fn(gpu_at(gpu).handle), "nvmlDeviceResetMemoryLockedClocks", where(gpu));
}

}  // namespace zeus::device::nvml
