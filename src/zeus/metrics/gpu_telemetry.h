// What the node exporter reads of a GPU: identity once, readings on each sampler tick. Every
// reading is optional (a GPU without that sensor, a driver without that call). The one
// implementation over real GPUs is GpuSetTelemetry, a view of the device layer's GpuSet.
#pragma once

#include <string>

#include "zeus/device/gpu_set.h"

namespace zeus::metrics {

struct GpuIdentity {
  int index = 0;  // the machine's index: the `gpu` label (what nvidia-smi and DCGM call it)
  std::string uuid;
  std::string name;
  std::string pci_address;  // "0000:01:00.0", or "" where the backend has none
};

// One tick's readings (the device layer's: device/gpu_set.h).
using GpuReading = device::GpuReading;

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
