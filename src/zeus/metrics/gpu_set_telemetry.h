// GpuTelemetry over a device::GpuSet: the exporter's view of any backend's GPUs (NVML, the
// simulator, AMD's). What it reads is what the backend's GpuSet::read() offers (its
// capabilities); the `gpu` label is the GPU's machine index.
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
