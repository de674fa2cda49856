// Changes GPU power limits so that they are always put back: on destruction (return or
// exception), on SIGINT/SIGTERM/SIGHUP, and, through the journal, after SIGKILL or a crash.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <mutex>

#include "zeus/device/gpu_set.h"

namespace zeus::device {

struct PowerLimitGuardOptions {
  // Where the original limits are journaled before the first change; empty: no journal (then a
  // SIGKILL leaves the limits changed). Usually <log dir>/power-limits.journal.
  std::filesystem::path journal_path;
  // Restore on SIGINT, SIGTERM and SIGHUP, then let the signal take its previous action.
  bool restore_on_signal = true;
};

// Contract: one guard per set of GPUs the process controls (the node's local master). Methods
// may be called from any thread. The original limit of each GPU is the one read just before
// this guard first changed it (a site may run below the default on purpose): restore puts that
// value back, not the maximum. Signal handlers are installed while a guard with
// restore_on_signal lives; a handler the program installed earlier still runs afterwards, and a
// signal the program ignores (SIGHUP under nohup) is left ignored.
class PowerLimitGuard {
 public:
  PowerLimitGuard(GpuSet& gpus, PowerLimitGuardOptions options);
  // Restores (errors are logged, never thrown).
  ~PowerLimitGuard();
  PowerLimitGuard(const PowerLimitGuard&) = delete;
  PowerLimitGuard& operator=(const PowerLimitGuard&) = delete;

  // Records the GPU's current limit (and journals it) the first time, then sets the new one.
  // After a signal restored the limits, throws Error: the process is shutting down.
  void set_power_limit_mw(int gpu, int64_t limit_mw);

  // Puts every original limit back and removes the journal. Throws DeviceError naming the GPUs
  // that failed (the journal is kept for `zeus restore-limits`).
  void restore();

  // The recorded originals, GPU index -> mW (empty after restore()).
  std::map<int, int64_t> originals() const;

  // Used by the signal watcher: restore and log instead of throwing.
  void restore_after_signal(int signo) noexcept;

 private:
  void restore_locked();

  GpuSet& gpus_;
  PowerLimitGuardOptions options_;
  mutable std::mutex mu_;
  std::map<int, int64_t> originals_;
  bool interrupted_ = false;
};

}  // namespace zeus::device
