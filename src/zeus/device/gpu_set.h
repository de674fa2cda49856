// What zeus-cpp can measure and control on the GPUs a process sees.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/common/power.h"

namespace zeus::device {

using zeus::PowerLimitRange;  // common/power.h

// What one GPU can do, probed once when its set opens. A reading the GPU lacks is left empty
// (GpuReading) or falls back (power_mw's average, energy integrated from power); a change it
// lacks throws NotSupported naming the GPU and the call.
struct GpuCapabilities {
  bool instant_power = false;      // power_mw() is instantaneous, not a windowed average
  bool energy_counter = false;     // energy_mj() reads a hardware counter
  bool power_limit = true;         // the limit can be read, and set with privileges
  bool clocks = false;             // locked clocks can be set and reset
  bool persistence = false;        // the persistence mode can be read and set
  bool temperature = false;        // GpuReading::temperature_c
  bool throttle_counters = false;  // GpuReading::{power,thermal}_throttle_s
};

// What the metrics exporter reads of a GPU on one tick. Every reading is optional (a GPU without
// that sensor, a driver without that call).
struct GpuReading {
  std::optional<double> power_w;
  // The GPU's energy counter (J since the driver loaded); absent: the sampler integrates power.
  std::optional<double> energy_j;
  std::optional<double> power_limit_w;
  std::optional<double> power_limit_min_w;
  std::optional<double> power_limit_max_w;
  std::optional<double> temperature_c;
  std::optional<double> sm_clock_hz;
  std::optional<double> memory_clock_hz;
  // Time the clocks were held down by the power limit / by temperature, cumulative, in s.
  std::optional<double> power_throttle_s;
  std::optional<double> thermal_throttle_s;
};

// The GPUs one process may see, indexed 0..count()-1 in the order the user sees them (CUDA's
// order after CUDA_VISIBLE_DEVICES), or every GPU of the machine (zeusd, the exporter,
// `zeus restore-limits`). The one interface of the device layer: each backend (nvml/, sim/; see
// registry.h) implements reading and changing once, and zeusd's GpuControl, the exporter's
// GpuTelemetry and the job's GPUs are views of it. zeusd/zeusd_gpu_set.h routes the changes of
// any backend through the node daemon.
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
  // The GPU's index among all of the machine's GPUs in its backend's order (NVML's index, the
  // `gpu` label of the exporter, the GPU id of zeusd's wire API). Default: `gpu`.
  virtual int machine_index(int gpu) const;
  // "0000:01:00.0" (domain:bus:device.0, lower-case hex), or "" where the backend has none.
  virtual std::string pci_address(int gpu) const;
  // The UUID of the GPU holding MIG (or partition) instance `instance_uuid`, or std::nullopt
  // (unknown instance, or a backend without instances).
  virtual std::optional<std::string> mig_parent_uuid(std::string_view instance_uuid) const;
  // The runtime's visibility list for this process, in CUDA_VISIBLE_DEVICES's form: positions
  // in this set (opened machine-wide: machine order) in the order the runtime numbers them, or
  // std::nullopt when it shows every GPU in that order. Default: CUDA_VISIBLE_DEVICES as set; a
  // backend whose runtime reads other variables or numbers differently (ROCm's HIP order)
  // composes them.
  virtual std::optional<std::string> runtime_visible_devices() const;
  // Where changes go when not to the GPU directly ("zeusd at /run/zeusd.sock"), else "".
  virtual std::string limits_through() const { return {}; }
  virtual GpuCapabilities capabilities(int gpu) const;

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

  // One tick of the exporter: power, energy, limits, and whatever else capabilities() has.
  // Throws when the GPU fails as a whole (lost); a reading it lacks is left empty.
  virtual GpuReading read(int gpu);
  // Processes with a compute context on the GPU (empty where the backend cannot tell).
  virtual std::vector<pid_t> compute_pids(int gpu);

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
