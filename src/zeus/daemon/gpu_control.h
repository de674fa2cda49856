// What zeusd reads and changes on the node's GPUs, indexed by NVML index (the ids of Zeus 0.16's
// wire API, which its Python client sends as the physical GPU number).
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "zeus/common/power.h"

namespace zeus::daemon {

struct GpuIdentity {
  std::string name;
  std::string uuid;
  std::string pci_address;  // "0000:01:00.0" (domain:bus:device.0, lower-case hex)
  bool energy_available = false;
};

// Contract: methods may be called from many threads at once. An id outside 0..count()-1 is the
// caller's to refuse first (the routes do). Failures throw the common error tree:
// ConfigError for a value the GPU refuses (outside its range), NotSupported, PermissionError,
// DeviceLost or DeviceError otherwise; each message names the GPU and the call. The routes map
// these to Zeus 0.16's statuses (400, 400, 403, 500).
class GpuControl {
 public:
  virtual ~GpuControl() = default;
  GpuControl(const GpuControl&) = delete;
  GpuControl& operator=(const GpuControl&) = delete;

  virtual int count() const = 0;
  virtual GpuIdentity identity(int gpu) const = 0;

  virtual uint64_t energy_mj(int gpu) = 0;
  virtual uint32_t power_mw(int gpu) = 0;  // instant power where the GPU has it
  virtual uint32_t power_limit_mw(int gpu) = 0;
  virtual PowerLimitRange power_limit_constraints_mw(int gpu) = 0;
  virtual bool persistence_mode(int gpu) = 0;
  // Processes with a compute context on the GPU (NVML's list; empty where it is unsupported).
  virtual std::vector<pid_t> compute_pids(int gpu) = 0;

  virtual void set_power_limit_mw(int gpu, uint32_t limit_mw) = 0;
  virtual void set_persistence_mode(int gpu, bool enabled) = 0;
  virtual void set_gpu_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) = 0;
  virtual void reset_gpu_locked_clocks(int gpu) = 0;
  virtual void set_mem_locked_clocks(int gpu, uint32_t min_mhz, uint32_t max_mhz) = 0;
  virtual void reset_mem_locked_clocks(int gpu) = 0;
  // Both domains (Zeus 0.16's /gpu/reset_locked_clocks): tries both, throws the first error.
  virtual void reset_locked_clocks(int gpu) {
    std::exception_ptr first;
    try {
      reset_gpu_locked_clocks(gpu);
    } catch (...) {
      first = std::current_exception();
    }
    try {
      reset_mem_locked_clocks(gpu);
    } catch (...) {
      if (!first) {
        first = std::current_exception();
      }
    }
    if (first) {
      std::rethrow_exception(first);
    }
  }

 protected:
  GpuControl() = default;
};

}  // namespace zeus::daemon
