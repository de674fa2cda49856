// GpuTelemetry over a device::GpuSet (simulated GPUs, GPUs read through zeusd): power, energy
// and the power limit, which is what a GpuSet offers. Indices are the set's (CUDA's order); the
// `gpu` label is that index. On a real node the exporter uses NVML's telemetry instead.
#pragma once

#include <vector>

#include "zeus/device/gpu_set.h"
#include "zeus/metrics/gpu_telemetry.h"

namespace zeus::metrics {

class GpuSetTelemetry final : public GpuTelemetry {
 public:
  // `gpus` must outlive this object.
  explicit GpuSetTelemetry(device::GpuSet& gpus);

  int count() const override { return static_cast<int>(identities_.size()); }
  const GpuIdentity& identity(int gpu) const override;
  GpuReading read(int gpu) override;

 private:
  device::GpuSet& gpus_;
  std::vector<GpuIdentity> identities_;
};

}  // namespace zeus::metrics
