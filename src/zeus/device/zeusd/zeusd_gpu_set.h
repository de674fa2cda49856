// "Through zeusd": a GpuSet whose changes go to the node daemon and whose reads stay local, over
// any backend's set (upstream's ZeusdNVIDIAGPU, for every vendor). How a job that is not root
// lowers limits: zeusd holds them as a lease and restores them when the job's processes end.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "zeus/device/gpu_set.h"
#include "zeus/device/zeusd/zeusd_client.h"

namespace zeus::device::zeusd {

// Which of the daemon's GPUs is GPU `gpu` of `local` (Note [GPU identity] in docs/zeusd.md):
// the daemon's GPU of the same UUID; else of the same PCI address (upstream HEAD's zeusd lists
// no UUIDs); else, where the daemon lists neither (upstream's tagged zeusd) or the GPU has no
// identity a daemon could know (a simulated GPU: no PCI address, a UUID of its own), the daemon's
// GPU of its machine index, as upstream's client sends. A pod sees only its own GPUs, numbered
// from 0, so an index is never sent where an identity matches. Throws ConfigError naming the GPU
// and what the daemon has when a GPU with an identity matches none (another node's daemon, or a
// GPU zeusd does not see).
int daemon_gpu_id(const GpuSet& local, int gpu, const std::vector<DaemonGpu>& daemon,
                  const std::string& where);

class ZeusdGpuSet final : public GpuSet {
 public:
  // The daemon's id of each GPU is found by daemon_gpu_id() at the first change (a set that
  // only reads never asks the daemon).
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
  // The daemon's id of `gpu` (asks the daemon's GPU list once).
  int daemon_id(int gpu);

  std::unique_ptr<GpuSet> inner_;
  ZeusdClient client_;
  std::mutex ids_mu_;
  std::optional<std::vector<DaemonGpu>> daemon_gpus_;  // under ids_mu_
};

}  // namespace zeus::device::zeusd
