// GpuControl over NVML (the project's dlopen'd library, or the fake one in tests): every GPU of
// the machine in NVML order, whatever CUDA_VISIBLE_DEVICES says.
#pragma once

#include <memory>
#include <vector>

#include "zeus/daemon/gpu_control.h"
#include "zeus/device/nvml/nvml_library.h"

namespace zeus::daemon::nvml {

class NvmlGpuControl final : public GpuControl {
 public:
  // Throws what NvmlLibrary throws (no driver, no library) and DeviceError for a GPU that does
  // not answer its identity calls.
  explicit NvmlGpuControl(device::nvml::NvmlLibraryOptions options = {});
  ~NvmlGpuControl() override;

  int count() const override { return static_cast<int>(gpus_.size()); }
  GpuIdentity identity(int gpu) const override;
  uint64_t energy_mj(int gpu) override;
  uint32_t power_mw(int gpu) override;
  uint32_t power_limit_mw(int gpu) override;
  PowerLimitRange power_limit_constraints_mw(int gpu) override;
  bool persistence_mode(int gpu) override;
  std::vector<pid_t> compute_pids(int gpu) override;
  void set_power_limit_mw(int gpu, uint32_t limit_mw) override;
  void set_persistence_mode(int gpu, bool enabled) override;
  void set_gpu_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) override;
  void reset_gpu_locked_clocks(int gpu) override;
  void set_mem_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) override;
  void reset_mem_locked_clocks(int gpu) override;

 private:
  struct Gpu {
    nvmlDevice_t handle = nullptr;
    GpuIdentity identity;
    bool instant_power = false;
  };
  const Gpu& at(int gpu) const;
  // Throws the typed error for rc, naming the call and the GPU.
  void check(nvmlReturn_t rc, const char* function, int gpu) const;
  // The optional entry point, or NotSupported naming it.
  template <typename F>
  F need(F fn, const char* function, int gpu) const;

  std::unique_ptr<device::nvml::NvmlLibrary> lib_;
  std::vector<Gpu> gpus_;
};

}  // namespace zeus::daemon::nvml
