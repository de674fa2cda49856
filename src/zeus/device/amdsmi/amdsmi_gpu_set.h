// GpuSet over AMD SMI: the AMD GPUs of this machine as ROCm PyTorch sees them. Changes go to the
// library; the registry wraps the set in zeusd/zeusd_gpu_set.h when they must go through the
// daemon.
//
// Two numberings (docs/amd.md): a process's set follows HIP's order (what PyTorch calls cuda:N:
// amdsmi_get_gpu_enumeration_info's hip_id, else KFD node ids), filtered by ROCR_VISIBLE_DEVICES
// and then HIP_VISIBLE_DEVICES (or CUDA_VISIBLE_DEVICES); machine_index is AMD SMI's own handle
// order (sockets, then processors), which upstream zeusd uses for GPU ids, so upstream's clients
// and the exporter's `gpu` label agree with upstream. A machine-wide set is in machine order.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "zeus/device/amdsmi/amdsmi_library.h"
#include "zeus/device/gpu_set.h"

namespace zeus::device::amdsmi {

struct AmdsmiGpuSetOptions {
  AmdsmiLibraryOptions library;
  // Honour ROCR_/HIP_/CUDA_VISIBLE_DEVICES (the GPUs in HIP's order). Off: every GPU of the
  // machine in machine order (runtime_visible_devices() then gives HIP's).
  bool respect_visible_devices = true;
  // Exactly these GPUs (machine indices), in this order; overrides the option above.
  std::optional<std::vector<int>> machine_indices;
  // How long the energy counters are watched against power before they are trusted.
  std::chrono::milliseconds counter_check_window{500};
};

class AmdsmiGpuSet final : public GpuSet {
 public:
  explicit AmdsmiGpuSet(AmdsmiGpuSetOptions options = {});
  ~AmdsmiGpuSet() override;

  std::string locator() const override { return "amdsmi"; }
  int count() const override { return static_cast<int>(gpus_.size()); }
  std::string name(int gpu) const override;
  std::string uuid(int gpu) const override;
  std::string describe(int gpu) const override;
  int machine_index(int gpu) const override { return gpu_at(gpu).machine_index; }
  std::string pci_address(int gpu) const override;
  std::optional<std::string> runtime_visible_devices() const override;
  GpuCapabilities capabilities(int gpu) const override;
  GpuReading read(int gpu) override;
  std::vector<pid_t> compute_pids(int gpu) override;
  int64_t power_mw(int gpu) override;
  bool has_energy_counter(int gpu) const override;
  std::optional<int64_t> energy_mj(int gpu) override;
  int64_t power_limit_mw(int gpu) override;
  PowerLimitRange power_limit_constraints_mw(int gpu) override;
  int64_t default_power_limit_mw(int gpu) override;
  void set_power_limit_mw(int gpu, int64_t limit_mw) override;
  void set_gpu_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) override;
  void reset_gpu_locked_clocks(int gpu) override;
  void set_mem_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) override;
  void reset_mem_locked_clocks(int gpu) override;

  const AmdsmiLibrary& library() const { return *lib_; }

 private:
  struct Gpu {
    amdsmi_processor_handle handle = nullptr;
    int machine_index = 0;  // AMD SMI's handle order
    int hip_index = 0;
    std::string name;
    std::string uuid;
    std::string pci;
    // The socket power reads (false: an MI250 odd die); current_socket_power where
    // can.instant_power, else average_socket_power.
    bool power = true;
    // The GPU whose reading includes this one's (an MI250/MI250X odd die's even partner).
    std::optional<int> shares_reading_of;
    bool counter_present = false;  // amdsmi_get_energy_count answers
    GpuCapabilities can;
  };
  const Gpu& gpu_at(int gpu) const;
  std::string where(int gpu) const;
  // Watches every present counter against power once, on first use (Note [energy counter]).
  void check_counters() const;
  amdsmi_power_cap_info_t cap_info(int gpu);
  int64_t socket_power_mw(int gpu) const;
  // The counter's reading in uJ.
  double counter_uj(const Gpu& g, int gpu) const;
  void set_clock_range(int gpu, uint32_t type, uint32_t min_mhz, uint32_t max_mhz,
                       const char* what);
  template <typename F>
  F need(F fn, const char* function, int gpu) const;

  std::unique_ptr<AmdsmiLibrary> lib_;
  std::chrono::milliseconds counter_check_window_;
  std::vector<Gpu> gpus_;
  std::vector<std::string> hip_uuids_;
  mutable std::once_flag counters_checked_;
  mutable std::vector<bool> counter_trusted_;  // by position, set by check_counters()
};

}  // namespace zeus::device::amdsmi
