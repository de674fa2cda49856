#include "zeus/device/nvml/nvml_library.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>

#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"

namespace zeus::device::nvml {

NvmlLibrary::NvmlLibrary(NvmlLibraryOptions options) {
  std::vector<std::string> candidates;
  if (!options.path.empty()) {
    candidates.push_back(options.path);
  } else if (auto env = get_env(kEnvNvmlLibrary)) {
    candidates.push_back(*env);
  } else {
    candidates = {"libnvidia-ml.so.1", "libnvidia-ml.so"};
  }
  library_ = std::make_unique<DynamicLibrary>(candidates);
  if (!library_->loaded()) {
    throw NotSupported(fmt::format(
        "cannot load NVML ({}); install the NVIDIA driver, or set {} to the library's path, or "
        "use --device sim:<gpu> to simulate",
        fmt::join(library_->errors(), "; "), kEnvNvmlLibrary.name));
  }
  path_ = library_->path();

  // Versioned names first: the unversioned ones are older ABI variants kept for old drivers.
  const auto [missing_required, missing_optional] = library_->resolve({
      {{"nvmlInit_v2", "nvmlInit"}, symbol_slot(&api_.init), true},
      {{"nvmlShutdown"}, symbol_slot(&api_.shutdown), true},
      {{"nvmlErrorString"}, symbol_slot(&api_.error_string), true},
      {{"nvmlDeviceGetCount_v2", "nvmlDeviceGetCount"}, symbol_slot(&api_.device_get_count), true},
      {{"nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex"},
       symbol_slot(&api_.device_get_handle_by_index),
       true},
      {{"nvmlDeviceGetName"}, symbol_slot(&api_.device_get_name), true},
      {{"nvmlDeviceGetUUID"}, symbol_slot(&api_.device_get_uuid), true},
      {{"nvmlDeviceGetPowerUsage"}, symbol_slot(&api_.device_get_power_usage), true},
      {{"nvmlDeviceGetPowerManagementLimit"}, symbol_slot(&api_.device_get_power_limit), true},
      {{"nvmlDeviceGetPowerManagementLimitConstraints"},
       symbol_slot(&api_.device_get_power_limit_constraints),
       true},
      {{"nvmlDeviceGetPowerManagementDefaultLimit"},
       symbol_slot(&api_.device_get_default_power_limit),
       true},
      {{"nvmlDeviceSetPowerManagementLimit"}, symbol_slot(&api_.device_set_power_limit), true},
      {{"nvmlDeviceGetTotalEnergyConsumption"}, symbol_slot(&api_.device_get_total_energy), false},
      {{"nvmlDeviceGetFieldValues"}, symbol_slot(&api_.device_get_field_values), false},
      {{"nvmlDeviceGetHandleByUUID"}, symbol_slot(&api_.device_get_handle_by_uuid), false},
      {{"nvmlDeviceGetDeviceHandleFromMigDeviceHandle"},
       symbol_slot(&api_.device_get_device_handle_from_mig_device_handle),
       false},
      {{"nvmlDeviceGetPersistenceMode"}, symbol_slot(&api_.device_get_persistence_mode), false},
      {{"nvmlDeviceSetPersistenceMode"}, symbol_slot(&api_.device_set_persistence_mode), false},
      {{"nvmlDeviceGetPciInfo_v3"}, symbol_slot(&api_.device_get_pci_info), false},
      {{"nvmlDeviceGetComputeRunningProcesses_v3"},
       symbol_slot(&api_.device_get_compute_running_processes),
       false},
      {{"nvmlDeviceSetGpuLockedClocks"}, symbol_slot(&api_.device_set_gpu_locked_clocks), false},
      {{"nvmlDeviceResetGpuLockedClocks"},
       symbol_slot(&api_.device_reset_gpu_locked_clocks),
       false},
      {{"nvmlDeviceSetMemoryLockedClocks"},
       symbol_slot(&api_.device_set_memory_locked_clocks),
       false},
      {{"nvmlDeviceResetMemoryLockedClocks"},
       symbol_slot(&api_.device_reset_memory_locked_clocks),
       false},
      {{"nvmlDeviceGetTemperature"}, symbol_slot(&api_.device_get_temperature), false},
      {{"nvmlDeviceGetClockInfo"}, symbol_slot(&api_.device_get_clock_info), false},
  });
  missing_optional_ = missing_optional;
  if (!missing_required.empty()) {
    throw DeviceError(fmt::format(
        "NVML library '{}' lacks required function(s) {}; the NVIDIA driver is too old or the "
        "library is not NVML",
        path_, fmt::join(missing_required, ", ")));
  }
  if (!missing_optional_.empty()) {
    logger().debug("NVML '{}' lacks optional {}", path_, fmt::join(missing_optional_, ", "));
  }
  const nvmlReturn_t rc = api_.init();
  if (rc != NVML_SUCCESS) {
    throw DeviceError(
        fmt::format("nvmlInit_v2 failed in '{}': {} (NVML error {}); check that the NVIDIA driver "
                    "is loaded (nvidia-smi)",
                    path_, error_string(rc), rc));
  }
}

NvmlLibrary::~NvmlLibrary() {
  api_.shutdown();
}

std::string NvmlLibrary::error_string(nvmlReturn_t rc) const {
  if (api_.error_string != nullptr) {
    if (const char* s = api_.error_string(rc)) {
      return s;
    }
  }
  return fmt::format("NVML error {}", rc);
}

void check_nvml(const NvmlLibrary& lib, nvmlReturn_t rc, std::string_view function,
                std::string_view where) {
  if (rc == NVML_SUCCESS) {
    return;
  }
  const std::string base =
      fmt::format("{} failed on {}: {} (NVML error {})", function, where, lib.error_string(rc), rc);
  switch (rc) {
    case NVML_ERROR_NO_PERMISSION:
      throw PermissionError(
          base +
          "; changing GPU power limits needs root or CAP_SYS_ADMIN: run as root (or grant the "
          "capability), ask an administrator, or measure energy without changing limits with "
          "ZEUS_MEASURE_ONLY=true (--measure-only in the examples)");
    case NVML_ERROR_NOT_SUPPORTED:
    case NVML_ERROR_FUNCTION_NOT_FOUND:
      throw NotSupported(base + "; this GPU or driver does not offer it");
    case NVML_ERROR_GPU_IS_LOST:
    case NVML_ERROR_NOT_FOUND:  // on a device call: the GPU left the bus
      throw DeviceLost(base + "; the GPU stopped answering: check `nvidia-smi` and the kernel log");
    case NVML_ERROR_INVALID_ARGUMENT:
      throw ConfigError(base);
    default:
      throw DeviceError(base);
  }
}

std::vector<NvmlDevice> list_devices(const NvmlLibrary& lib) {
  const NvmlApi& api = lib.api();
  unsigned int count = 0;
  check_nvml(lib, api.device_get_count(&count), "nvmlDeviceGetCount_v2", "this machine");
  std::vector<NvmlDevice> out(count);
  for (unsigned int i = 0; i < count; ++i) {
    NvmlDevice& d = out[i];
    const std::string where = fmt::format("NVML device {}", i);
    check_nvml(lib, api.device_get_handle_by_index(i, &d.handle), "nvmlDeviceGetHandleByIndex_v2",
               where);
    std::array<char, kNvmlDeviceUuidBufferSize> uuid{};
    check_nvml(lib, api.device_get_uuid(d.handle, uuid.data(), uuid.size()), "nvmlDeviceGetUUID",
               where);
    std::array<char, kNvmlDeviceNameBufferSize> name{};
    check_nvml(lib, api.device_get_name(d.handle, name.data(), name.size()), "nvmlDeviceGetName",
               where);
    d.uuid = uuid.data();
    d.name = name.data();
  }
  return out;
}

std::optional<double> field_value(const nvmlFieldValue_t& field) {
  switch (field.valueType) {
    case NVML_VALUE_TYPE_DOUBLE:
      return field.value.dVal;
    case NVML_VALUE_TYPE_UNSIGNED_INT:
      return static_cast<double>(field.value.uiVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG:
      return static_cast<double>(field.value.ulVal);
    case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
      return static_cast<double>(field.value.ullVal);
    case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
      return static_cast<double>(field.value.sllVal);
    case NVML_VALUE_TYPE_SIGNED_INT:
      return static_cast<double>(field.value.siVal);
    default:
      return std::nullopt;
  }
}

}  // namespace zeus::device::nvml
