// NvmlGpuSet's readings beyond power and energy: the exporter's tick and zeusd's process list.
#include <fmt/format.h>

#include <array>

#include "zeus/common/errors.h"
#include "zeus/common/power.h"
#include "zeus/device/nvml/nvml_gpu_set.h"

namespace zeus::device::nvml {

GpuReading NvmlGpuSet::read(int gpu) {
  const Gpu& g = gpu_at(gpu);
  const NvmlApi& api = lib_->api();
  const std::string at = where(gpu);
  // A reading the GPU lacks is left empty; any other failure is the GPU's and throws.
  const auto optional = [&](nvmlReturn_t rc, const char* function) {
    if (rc == NVML_ERROR_NOT_SUPPORTED) {
      return false;
    }
    check_nvml(*lib_, rc, function, at);
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
    return have_fields && fields[k].nvmlReturn == NVML_SUCCESS ? field_value(fields[k])
                                                               : std::nullopt;
  };
  if (const auto instant_mw = field(0); instant_mw && g.can.instant_power) {
    r.power_w = mw_to_w(*instant_mw);
  } else {
    check_nvml(*lib_, api.device_get_power_usage(g.handle, &value), "nvmlDeviceGetPowerUsage", at);
    r.power_w = mw_to_w(static_cast<int64_t>(value));
  }
  if (const auto ns = field(1)) {
    r.power_throttle_s = *ns * 1e-9;
  }
  if (const auto ns = field(2)) {
    r.thermal_throttle_s = *ns * 1e-9;
  }

  if (g.can.energy_counter) {
    unsigned long long energy_mj = 0;
    if (optional(api.device_get_total_energy(g.handle, &energy_mj),
                 "nvmlDeviceGetTotalEnergyConsumption")) {
      r.energy_j = mj_to_j(static_cast<int64_t>(energy_mj));
    }
  }
  check_nvml(*lib_, api.device_get_power_limit(g.handle, &value),
             "nvmlDeviceGetPowerManagementLimit", at);
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

std::vector<pid_t> NvmlGpuSet::compute_pids(int gpu) {
  const Gpu& g = gpu_at(gpu);
  const auto fn = lib_->api().device_get_compute_running_processes;
  if (fn == nullptr) {
    return {};
  }
  std::vector<nvmlProcessInfo_t> infos(16);
  for (int attempt = 0; attempt < 4; ++attempt) {
    auto n = static_cast<unsigned int>(infos.size());
    const nvmlReturn_t rc = fn(g.handle, &n, infos.data());
    if (rc == NVML_ERROR_INSUFFICIENT_SIZE) {
      infos.resize(n + 8);  // processes may start between the calls
      continue;
    }
    if (rc == NVML_ERROR_NOT_SUPPORTED) {
      return {};
    }
    check_nvml(*lib_, rc, "nvmlDeviceGetComputeRunningProcesses_v3", where(gpu));
    std::vector<pid_t> pids;
    for (unsigned k = 0; k < n; ++k) {
      pids.push_back(static_cast<pid_t>(infos[k].pid));
    }
    return pids;
  }
  throw DeviceError(fmt::format("{}: its process list kept growing while read", where(gpu)));
}

}  // namespace zeus::device::nvml
