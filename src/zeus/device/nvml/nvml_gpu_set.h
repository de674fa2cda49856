// GpuSet over NVML: the real GPUs of this machine, as the process sees them. Changes go to NVML;
// the registry wraps the set in zeusd/zeusd_gpu_set.h when they must go through the daemon.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zeus/device/gpu_set.h"
#include "zeus/device/nvml/nvml_library.h"
#include "zeus/device/visible_devices.h"

namespace zeus::device::nvml {

struct NvmlGpuSetOptions {
  NvmlLibraryOptions library;
  // Honour CUDA_VISIBLE_DEVICES (what the user's program sees). Off for `zeus restore-limits`,
  // which must reach every GPU of the machine by UUID.
  bool respect_visible_devices = true;
  // Value of CUDA_VISIBLE_DEVICES; std::nullopt reads the environment.
  std::optional<std::string> visible_devices;
  // Exactly these NVML GPUs, in this order (a node's local master: the GPUs its ranks use,
  // matched by UUID); overrides the two options above.
  std::optional<std::vector<int>> nvml_indices;
};

class NvmlGpuSet final : public GpuSet {
 public:
  explicit NvmlGpuSet(NvmlGpuSetOptions options = {});
  ~NvmlGpuSet() override;

  std::string locator() const override { return "nvml"; }
  int count() const override { return static_cast<int>(gpus_.size()); }
  std::string name(int gpu) const override;
  std::string uuid(int gpu) const override;
  std::string describe(int gpu) const override;
  int machine_index(int gpu) const override { return gpu_at(gpu).nvml_index; }
  std::string pci_address(int gpu) const override;
  // The UUID of the GPU holding MIG instance `mig_uuid`, or std::nullopt (unknown instance, or a
  // driver without the MIG calls).
  std::optional<std::string> mig_parent_uuid(std::string_view mig_uuid) const override;
  GpuCapabilities capabilities(int gpu) const override;
  GpuReading read(int gpu) override;  // nvml_read.cpp
  std::vector<pid_t> compute_pids(int gpu) override;
  int64_t power_mw(int gpu) override;
  bool has_energy_counter(int gpu) const override;
  std::optional<int64_t> energy_mj(int gpu) override;
  int64_t power_limit_mw(int gpu) override;
  PowerLimitRange power_limit_constraints_mw(int gpu) override;
  int64_t default_power_limit_mw(int gpu) override;
  void set_power_limit_mw(int gpu, int64_t limit_mw) override;
  bool persistence_mode(int gpu) override;
  void set_persistence_mode(int gpu, bool enabled) override;
  void set_gpu_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) override;
  void reset_gpu_locked_clocks(int gpu) override;
  void set_mem_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) override;
  void reset_mem_locked_clocks(int gpu) override;

  const NvmlLibrary& library() const { return *lib_; }

 private:
  struct Gpu {
    nvmlDevice_t handle = nullptr;
    int nvml_index = 0;
    std::string name;
    std::string uuid;
    GpuCapabilities can;
  };
  const Gpu& gpu_at(int gpu) const;
  std::string where(int gpu) const;
  // The optional NVML entry point, or NotSupported naming it and the GPU.
  template <typename F>
  F need(F fn, const char* function, int gpu) const;

  std::unique_ptr<NvmlLibrary> lib_;
  std::vector<Gpu> gpus_;
};

}  // namespace zeus::device::nvml
