// What the node exporter reads of a GPU: identity once, readings on each sampler tick. Every
// reading is optional (a GPU without that sensor, a driver without that call).
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace zeus::metrics {

struct GpuIdentity {
  int index = 0;  // NVML's index: the `gpu` label (what nvidia-smi and DCGM call the GPU)
  std::string uuid;
  std::string name;
};

struct GpuReading {
  std::optional<double> power_w;
  // NVML's energy counter (J since the driver loaded); absent: the sampler integrates power.
  std::optional<double> energy_j;
  std::optional<double> power_limit_w;
  std::optional<double> power_limit_min_w;
  std::optional<double> power_limit_max_w;
  std::optional<double> temperature_c;
  std::optional<double> sm_clock_hz;
  std::optional<double> memory_clock_hz;
  // Time the clocks were held down by the power limit / by temperature, cumulative, in s.
  std::optional<double> power_throttle_s;
  std::optional<double> thermal_throttle_s;
};

// Contract: read() may be called from one sampling thread while identity() is called from
// others. A GPU that fails as a whole (lost, its reads failing) throws the common error tree
// naming the GPU and the call; a reading it merely lacks is left empty.
class GpuTelemetry {
 public:
  virtual ~GpuTelemetry() = default;
  GpuTelemetry(const GpuTelemetry&) = delete;
  GpuTelemetry& operator=(const GpuTelemetry&) = delete;

  virtual int count() const = 0;
  virtual const GpuIdentity& identity(int gpu) const = 0;
  virtual GpuReading read(int gpu) = 0;

 protected:
  GpuTelemetry() = default;
};

}  // namespace zeus::metrics
