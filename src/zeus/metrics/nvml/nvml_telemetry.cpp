#include "zeus/metrics/nvml/nvml_telemetry.h"

#include <fmt/format.h>

#include <array>

#include "zeus/common/errors.h"
#include "zeus/common/power.h"

namespace zeus::metrics::nvml {

using device::nvml::check_nvml;
using device::nvml::NvmlApi;

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
    return have_fields && fields[k].nvmlReturn == NVML_SUCCESS
               ? device::nvml::field_value(fields[k])
               : std::nullopt;
  };
  if (const auto instant_mw = field(0); instant_mw && g.instant_power) {
    r.power_w = mw_to_w(*instant_mw);
  } else {
    g.instant_power = false;
    check_nvml(*lib_, api.device_get_power_usage(g.handle, &value), "nvmlDeviceGetPowerUsage",
               where);
    r.power_w = mw_to_w(static_cast<int64_t>(value));
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
      r.energy_j = mj_to_j(static_cast<int64_t>(energy_mj));
    } else {
      g.energy_counter = false;
    }
  }
  check_nvml(*lib_, api.device_get_power_limit(g.handle, &value),
             "nvmlDeviceGetPowerManagementLimit", where);
  r.power_limit_w = mw_to_w(static_cast<int64_t>(value));
  if (optional(api.device_get_power_limit_constraints(g.handle, &value, &second),
               "nvmlDeviceGetPowerManagementLimitConstraints")) {
    r.power_limit_min_w = mw_to_w(static_cast<int64_t>(value));
    r.power_limit_max_w = mw_to_w(static_cast<int64_t>(second));
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
