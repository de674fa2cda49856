// GpuTelemetry over NVML: every GPU of the machine in NVML's order, whatever
// CUDA_VISIBLE_DEVICES says (an exporter speaks for the node, not for one process).
#pragma once

#include <memory>
#include <vector>

#include "zeus/device/nvml/nvml_library.h"
#include "zeus/metrics/gpu_telemetry.h"

namespace zeus::metrics::nvml {

class NvmlTelemetry final : public GpuTelemetry {
 public:
  // Throws what NvmlLibrary throws (no driver or library), DeviceError for a GPU that does not
  // answer its identity calls.
  explicit NvmlTelemetry(device::nvml::NvmlLibraryOptions options = {});
  ~NvmlTelemetry() override;

  int count() const override { return static_cast<int>(gpus_.size()); }
  const GpuIdentity& identity(int gpu) const override;
  // Power and the power limit must answer (they are what every NVML GPU has): their failure
  // throws. The rest is left empty where the GPU says NOT_SUPPORTED (or the driver lacks the
  // call), and throws for any other failure.
  GpuReading read(int gpu) override;

 private:
  struct Gpu {
    nvmlDevice_t handle = nullptr;
    GpuIdentity identity;
    bool instant_power = true;   // cleared after the field first reads NOT_SUPPORTED
    bool energy_counter = true;  // likewise
  };

  std::unique_ptr<device::nvml::NvmlLibrary> lib_;
  std::vector<Gpu> gpus_;
};

}  // namespace zeus::metrics::nvml
