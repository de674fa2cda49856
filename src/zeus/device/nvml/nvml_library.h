// The one RAII loader of the NVML library: dlopen at run time, one symbol table, nvmlInit on
// construction and nvmlShutdown on destruction.
#pragma once

#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/device/dynamic_library.h"
#include "zeus/device/nvml/nvml_api.h"

namespace zeus::device::nvml {

struct NvmlLibraryOptions {
  // Library to load; empty: $ZEUS_NVML_LIBRARY, else libnvidia-ml.so.1, else libnvidia-ml.so.
  std::string path;
};

// Entry points resolved from the library. Required ones are never null; optional ones are null
// when the driver lacks them (older drivers), and callers fall back.
struct NvmlApi {
  nvmlInit_fn init = nullptr;
  nvmlShutdown_fn shutdown = nullptr;
  nvmlErrorString_fn error_string = nullptr;
  nvmlDeviceGetCount_fn device_get_count = nullptr;
  nvmlDeviceGetHandleByIndex_fn device_get_handle_by_index = nullptr;
  nvmlDeviceGetString_fn device_get_name = nullptr;
  nvmlDeviceGetString_fn device_get_uuid = nullptr;
  nvmlDeviceGetUInt_fn device_get_power_usage = nullptr;
  nvmlDeviceGetUInt_fn device_get_power_limit = nullptr;
  nvmlDeviceGetUIntPair_fn device_get_power_limit_constraints = nullptr;
  nvmlDeviceGetUInt_fn device_get_default_power_limit = nullptr;
  nvmlDeviceSetUInt_fn device_set_power_limit = nullptr;
  // Optional.
  nvmlDeviceGetULongLong_fn device_get_total_energy = nullptr;
  nvmlDeviceGetFieldValues_fn device_get_field_values = nullptr;
  nvmlDeviceGetHandleByUUID_fn device_get_handle_by_uuid = nullptr;
  nvmlDeviceGetDeviceHandleFromMigDeviceHandle_fn device_get_device_handle_from_mig_device_handle =
      nullptr;
  // Optional, for the node daemon (zeusd): settings beyond the power limit and what it reports.
  nvmlDeviceGetEnableState_fn device_get_persistence_mode = nullptr;
  nvmlDeviceSetEnableState_fn device_set_persistence_mode = nullptr;
  nvmlDeviceGetPciInfo_fn device_get_pci_info = nullptr;
  nvmlDeviceGetProcesses_fn device_get_compute_running_processes = nullptr;
  nvmlDeviceSetUIntPair_fn device_set_gpu_locked_clocks = nullptr;
  nvmlDeviceReset_fn device_reset_gpu_locked_clocks = nullptr;
  nvmlDeviceSetUIntPair_fn device_set_memory_locked_clocks = nullptr;
  nvmlDeviceReset_fn device_reset_memory_locked_clocks = nullptr;
  // Optional, for the metrics exporter: what operators watch beside power.
  nvmlDeviceGetSensorUInt_fn device_get_temperature = nullptr;
  nvmlDeviceGetSensorUInt_fn device_get_clock_info = nullptr;
};

// Loads NVML and initializes it. Throws NotSupported (library missing: dlerror() text, the
// paths tried, and what to do) or DeviceError (a required symbol missing, nvmlInit failing).
//
// Contract: NVML is thread-safe, so api() may be used from any thread while the object lives.
class NvmlLibrary {
 public:
  explicit NvmlLibrary(NvmlLibraryOptions options = {});
  ~NvmlLibrary();
  NvmlLibrary(const NvmlLibrary&) = delete;
  NvmlLibrary& operator=(const NvmlLibrary&) = delete;

  const NvmlApi& api() const { return api_; }
  const std::string& path() const { return path_; }
  // Names of optional symbols the library lacks.
  const std::vector<std::string>& missing_optional() const { return missing_optional_; }
  // nvmlErrorString(rc), or a generic text when even that is unavailable.
  std::string error_string(nvmlReturn_t rc) const;

 private:
  std::unique_ptr<DynamicLibrary> library_;
  std::string path_;
  NvmlApi api_;
  std::vector<std::string> missing_optional_;
};

// A device as NVML lists it: its handle, name and UUID.
struct NvmlDevice {
  nvmlDevice_t handle = nullptr;
  std::string name;
  std::string uuid;
};

// Every device of the machine in NVML's order. Throws DeviceError naming the device ("NVML
// device 2") and the call when one does not answer its identity calls.
std::vector<NvmlDevice> list_devices(const NvmlLibrary& lib);

// A field value as a number, whatever its union member (nvmlValue_t by valueType); std::nullopt
// for a value type nvml.h does not define.
std::optional<double> field_value(const nvmlFieldValue_t& field);

// The one checker for NVML return codes: throws the typed error for `rc` (PermissionError,
// NotSupported, DeviceLost, DeviceError) naming `function`, `where` (e.g. "GPU 0 (GPU-...,
// NVIDIA A40)") and nvmlErrorString. Returns when rc is NVML_SUCCESS.
void check_nvml(const NvmlLibrary& lib, nvmlReturn_t rc, std::string_view function,
                std::string_view where);

}  // namespace zeus::device::nvml
