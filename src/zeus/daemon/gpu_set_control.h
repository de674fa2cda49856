// zeusd's GpuControl over the device layer: every GPU of the machine, from any backend the
// registry has, as one GpuSet opened machine-wide and never through zeusd itself. The daemon
// owns the set; its metrics listener reads the same one.
#pragma once

#include <vector>

#include "zeus/daemon/gpu_control.h"
#include "zeus/device/gpu_set.h"

namespace zeus::daemon {

class GpuSetControl final : public GpuControl {
 public:
  // `gpus` must outlive this object.
  explicit GpuSetControl(device::GpuSet& gpus);

  int count() const override { return gpus_.count(); }
  GpuIdentity identity(int gpu) const override;

  uint64_t energy_mj(int gpu) override;
  uint32_t power_mw(int gpu) override;
  uint32_t power_limit_mw(int gpu) override;
  PowerLimitRange power_limit_constraints_mw(int gpu) override;
  bool persistence_mode(int gpu) override { return gpus_.persistence_mode(gpu); }
  std::vector<pid_t> compute_pids(int gpu) override { return gpus_.compute_pids(gpu); }

  void set_power_limit_mw(int gpu, uint32_t limit_mw) override;
  void set_persistence_mode(int gpu, bool enabled) override;
  void set_gpu_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) override;
  void reset_gpu_locked_clocks(int gpu) override;
  void set_mem_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) override;
  void reset_mem_locked_clocks(int gpu) override;

 private:
  device::GpuSet& gpus_;
  // Read once: names and PCI addresses do not change (energy_available is asked each time).
  std::vector<GpuIdentity> identities_;
};

}  // namespace zeus::daemon
