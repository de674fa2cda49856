// What zeus-cpp can measure and control on the GPUs a process sees.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "zeus/common/power.h"

namespace zeus::device {

using zeus::PowerLimitRange;  // common/power.h

// The GPUs one process may see, indexed 0..count()-1 in the order the user sees them (CUDA's
// order after CUDA_VISIBLE_DEVICES). Backends: nvml/ (real GPUs), sim/ (trace-backed).
//
// Contract: every method may be called from any thread, concurrently (the power monitor samples
// on its own thread while the trainer sets limits). An index outside 0..count()-1 throws
// ConfigError. Device failures throw DeviceError subclasses naming the GPU (index, uuid, name)
// and the failing call: PermissionError when privileges are missing, NotSupported when the GPU
// lacks the capability, DeviceLost when it stopped answering.
class GpuSet {
 public:
  virtual ~GpuSet() = default;
  GpuSet(const GpuSet&) = delete;
  GpuSet& operator=(const GpuSet&) = delete;

  // What reopens this set in another process, e.g. "nvml" or "sim:v100:imagenet:256@/tmp/s"
  // (written to power-limit journals so `zeus restore-limits` finds the same GPUs).
  virtual std::string locator() const = 0;
  virtual int count() const = 0;
  virtual std::string name(int gpu) const = 0;
  virtual std::string uuid(int gpu) const = 0;
  // One line on how this GPU is read, e.g. "power: instant field 186; energy: counter".
  virtual std::string describe(int gpu) const = 0;

  // Current power draw in mW.
  virtual int64_t power_mw(int gpu) = 0;
  // Whether energy_mj() reads a hardware counter on this GPU.
  virtual bool has_energy_counter(int gpu) const = 0;
  // Energy in mJ since an arbitrary origin fixed for the set's lifetime (monotonic), or
  // std::nullopt when the GPU has no counter (integrate power_mw() instead).
  virtual std::optional<int64_t> energy_mj(int gpu) = 0;

  virtual int64_t power_limit_mw(int gpu) = 0;
  virtual PowerLimitRange power_limit_constraints_mw(int gpu) = 0;
  virtual int64_t default_power_limit_mw(int gpu) = 0;
  // Sets the limit. Outside the constraints: ConfigError naming the range. Without root or
  // CAP_SYS_ADMIN: PermissionError that says so. Never a silent no-op.
  virtual void set_power_limit_mw(int gpu, int64_t limit_mw) = 0;

  // Settings beyond the power limit (Zeus 0.16's GPU objects offer them; zeus-cpp's own jobs
  // never need them). The defaults throw NotSupported naming the GPU and the call; NVML
  // implements them (through zeusd when limits go there). Clocks in MHz.
  virtual bool persistence_mode(int gpu);
  virtual void set_persistence_mode(int gpu, bool enabled);
  virtual void set_gpu_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz);
  virtual void reset_gpu_locked_clocks(int gpu);
  virtual void set_mem_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz);
  virtual void reset_mem_locked_clocks(int gpu);

  // Throws ConfigError naming the GPU and its range when `limit_mw` is outside the constraints,
  // so a caller can reject a value before it records or journals anything.
  void validate_power_limit_mw(int gpu, int64_t limit_mw);

 protected:
  GpuSet() = default;
  // Throws ConfigError when `gpu` is not a valid index.
  void check_index(int gpu) const;
  // Throws ConfigError when `limit_mw` is outside `range` for `gpu`.
  void check_limit(int gpu, int64_t limit_mw, PowerLimitRange range) const;
};

}  // namespace zeus::device
