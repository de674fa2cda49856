// "Through zeusd": a GpuSet whose changes go to the node daemon and whose reads stay local, over
// any backend's set (upstream's ZeusdNVIDIAGPU, for every vendor). How a job that is not root
// lowers limits: zeusd holds them as a lease and restores them when the job's processes end.
#pragma once

#include <memory>

#include "zeus/device/gpu_set.h"
#include "zeus/device/zeusd/zeusd_client.h"

namespace zeus::device::zeusd {

class ZeusdGpuSet final : public GpuSet {
 public:
  // The daemon names GPUs by `inner->machine_index(gpu)` (its wire API's GPU ids).
  ZeusdGpuSet(std::unique_ptr<GpuSet> inner, const ZeusdEndpoint& endpoint);
  ~ZeusdGpuSet() override;

  std::string locator() const override { return inner_->locator(); }
  int count() const override { return inner_->count(); }
  std::string name(int gpu) const override { return inner_->name(gpu); }
  std::string uuid(int gpu) const override { return inner_->uuid(gpu); }
  std::string describe(int gpu) const override;
  int machine_index(int gpu) const override { return inner_->machine_index(gpu); }
  std::string pci_address(int gpu) const override { return inner_->pci_address(gpu); }
  std::optional<std::string> mig_parent_uuid(std::string_view uuid) const override {
    return inner_->mig_parent_uuid(uuid);
  }
  std::string limits_through() const override;
  GpuCapabilities capabilities(int gpu) const override { return inner_->capabilities(gpu); }
  GpuReading read(int gpu) override { return inner_->read(gpu); }
  std::vector<pid_t> compute_pids(int gpu) override { return inner_->compute_pids(gpu); }

  int64_t power_mw(int gpu) override { return inner_->power_mw(gpu); }
  bool has_energy_counter(int gpu) const override { return inner_->has_energy_counter(gpu); }
  std::optional<int64_t> energy_mj(int gpu) override { return inner_->energy_mj(gpu); }
  int64_t power_limit_mw(int gpu) override { return inner_->power_limit_mw(gpu); }
  PowerLimitRange power_limit_constraints_mw(int gpu) override {
    return inner_->power_limit_constraints_mw(gpu);
  }
  int64_t default_power_limit_mw(int gpu) override { return inner_->default_power_limit_mw(gpu); }
  bool persistence_mode(int gpu) override { return inner_->persistence_mode(gpu); }

  // Changes: validated here, then made by the daemon (its refusals keep their meaning:
  // PermissionError for 401/403/409, ConfigError for 400).
  void set_power_limit_mw(int gpu, int64_t limit_mw) override;
  void set_persistence_mode(int gpu, bool enabled) override;
  void set_gpu_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) override;
  void reset_gpu_locked_clocks(int gpu) override;
  void set_mem_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) override;
  void reset_mem_locked_clocks(int gpu) override;

 private:
  std::unique_ptr<GpuSet> inner_;
  ZeusdClient client_;
};

}  // namespace zeus::device::zeusd
