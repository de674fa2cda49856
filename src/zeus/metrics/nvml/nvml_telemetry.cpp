#include "zeus/metrics/nvml/nvml_telemetry.h"

#include <fmt/format.h>

#include <array>

#include "zeus/common/errors.h"

namespace zeus::metrics::nvml {

using device::nvml::check_nvml;
using device::nvml::NvmlApi;

namespace {

constexpr double kMilli = 1e-3;

}  // namespace

NvmlTelemetry::NvmlTelemetry(device::nvml::NvmlLibraryOptions options)
    : lib_(std::make_unique<device::nvml::NvmlLibrary>(std::move(options))) {
  const NvmlApi& api = lib_->api();
  int index = 0;
  for (const auto& d : device::nvml::list_devices(*lib_)) {
    Gpu g;
    g.handle = d.handle;
    g.identity = GpuIdentity{index++, d.uuid, d.name};
    g.instant_power = api.device_get_field_values != nullptr;
    g.energy_counter = api.device_get_total_energy != nullptr;
    gpus_.push_back(std::move(g));
  }
}

NvmlTelemetry::~NvmlTelemetry() = default;

const GpuIdentity& NvmlTelemetry::identity(int gpu) const {
  if (gpu < 0 || gpu >= count()) {
    throw ConfigError(fmt::format("GPU {} not found: this machine has {}", gpu, count()));
  }
  return gpus_[static_cast<size_t>(gpu)].identity;
}

GpuReading NvmlTelemetry::read(int gpu) {
  identity(gpu);  // range check
  Gpu& g = gpus_[static_cast<size_t>(gpu)];
  const NvmlApi& api = lib_->api();
  const std::string where = fmt::format("GPU {} ({}, {})", gpu, g.identity.uuid, g.identity.name);
  // A reading the GPU lacks is left empty; any other failure is the GPU's and throws.
  const auto optional = [&](nvmlReturn_t rc, const char* function) {
    if (rc == NVML_ERROR_NOT_SUPPORTED) {
      return false;
    }
    check_nvml(*lib_, rc, function, where);
    return true;
  };
  GpuReading r;
  unsigned int value = 0;
  unsigned int second = 0;

  // One field-values call for the instant power and both throttle counters.
  std::array<nvmlFieldValue_t, 3> fields{};
  fields[0].fieldId = kNvmlFieldPowerInstant;
  fields[1].fieldId = kNvmlFieldThrottlePowerNs;
  fields[2].fieldId = kNvmlFieldThrottleThermalNs;
  bool have_fields = false;
  if (api.device_get_field_values != nullptr) {
    have_fields = optional(
        api.device_get_field_values(g.handle, static_cast<int>(fields.size()), fields.data()),
        "nvmlDeviceGetFieldValues");
  }
  const auto field = [&](size_t k) -> std::optional<double> {
    const nvmlFieldValue_t& f = fields[k];
    if (!have_fields || f.nvmlReturn != NVML_SUCCESS) {
      return std::nullopt;
    }
    switch (f.valueType) {
      case NVML_VALUE_TYPE_UNSIGNED_INT:
        return static_cast<double>(f.value.uiVal);
      case NVML_VALUE_TYPE_UNSIGNED_LONG_LONG:
        return static_cast<double>(f.value.ullVal);
      case NVML_VALUE_TYPE_SIGNED_LONG_LONG:
        return static_cast<double>(f.value.sllVal);
      case NVML_VALUE_TYPE_DOUBLE:
        return f.value.dVal;
      default:
        return std::nullopt;
    }
  };
  if (const auto instant_mw = field(0); instant_mw && g.instant_power) {
    r.power_w = *instant_mw * kMilli;
  } else {
    g.instant_power = false;
    check_nvml(*lib_, api.device_get_power_usage(g.handle, &value), "nvmlDeviceGetPowerUsage",
               where);
    r.power_w = value * kMilli;
  }
  if (const auto ns = field(1)) {
    r.power_throttle_s = *ns * 1e-9;
  }
  if (const auto ns = field(2)) {
    r.thermal_throttle_s = *ns * 1e-9;
  }

  if (g.energy_counter) {
    unsigned long long energy_mj = 0;
    if (optional(api.device_get_total_energy(g.handle, &energy_mj),
                 "nvmlDeviceGetTotalEnergyConsumption")) {
      r.energy_j = static_cast<double>(energy_mj) * kMilli;
    } else {
      g.energy_counter = false;
    }
  }
  check_nvml(*lib_, api.device_get_power_limit(g.handle, &value),
             "nvmlDeviceGetPowerManagementLimit", where);
  r.power_limit_w = value * kMilli;
  if (optional(api.device_get_power_limit_constraints(g.handle, &value, &second),
               "nvmlDeviceGetPowerManagementLimitConstraints")) {
    r.power_limit_min_w = value * kMilli;
    r.power_limit_max_w = second * kMilli;
  }
  if (api.device_get_temperature != nullptr &&
      optional(api.device_get_temperature(g.handle, kNvmlTemperatureGpu, &value),
               "nvmlDeviceGetTemperature")) {
    r.temperature_c = value;
  }
  if (api.device_get_clock_info != nullptr) {
    if (optional(api.device_get_clock_info(g.handle, kNvmlClockSm, &value),
                 "nvmlDeviceGetClockInfo(SM)")) {
      r.sm_clock_hz = value * 1e6;
    }
    if (optional(api.device_get_clock_info(g.handle, kNvmlClockMem, &value),
                 "nvmlDeviceGetClockInfo(MEM)")) {
      r.memory_clock_hz = value * 1e6;
    }
  }
  return r;
}

}  // namespace zeus::metrics::nvml
