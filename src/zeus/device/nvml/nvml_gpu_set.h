// GpuSet over NVML: the real GPUs of this machine, as the process sees them.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "zeus/device/gpu_set.h"
#include "zeus/device/nvml/cuda_mapping.h"
#include "zeus/device/nvml/nvml_library.h"
#include "zeus/device/zeusd/zeusd_client.h"

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
  // Set limits through this node daemon instead of NVML (reads stay local, as upstream's
  // ZeusdNVIDIAGPU); std::nullopt with zeusd_from_env: ZEUSD_SOCK_PATH / ZEUSD_HOST_PORT.
  std::optional<zeusd::ZeusdEndpoint> zeusd;
  bool zeusd_from_env = true;
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
  // Every GPU of the machine in NVML order, whatever this set shows.
  const std::vector<NvmlGpuIdentity>& machine_gpus() const { return machine_; }
  // The UUID of the GPU holding MIG instance `mig_uuid`, or std::nullopt (unknown instance, or a
  // driver without the MIG calls).
  std::optional<std::string> mig_parent_uuid(std::string_view mig_uuid) const;
  int nvml_index(int gpu) const { return gpu_at(gpu).nvml_index; }
  // The node daemon limits go through (it restores them when this process ends), or nullptr.
  const zeusd::ZeusdEndpoint* through_zeusd() const {
    return zeusd_ ? &zeusd_->endpoint() : nullptr;
  }

 private:
  struct Gpu {
    nvmlDevice_t handle = nullptr;
    int nvml_index = 0;
    std::string name;
    std::string uuid;
    bool instant_power = false;
    bool energy_counter = false;
  };
  const Gpu& gpu_at(int gpu) const;
  std::string where(int gpu) const;
  // The optional NVML entry point, or NotSupported naming it and the GPU.
  template <typename F>
  F need(F fn, const char* function, int gpu) const;

  std::unique_ptr<NvmlLibrary> lib_;
  std::unique_ptr<zeusd::ZeusdClient> zeusd_;
  std::vector<Gpu> gpus_;
  std::vector<NvmlGpuIdentity> machine_;
};

}  // namespace zeus::device::nvml
