// The GPUs one zeus_cpp object opened, shared by the objects that measure and control them:
// a ZeusMonitor's windows, a PowerMonitor's sampler, get_gpus()'s methods and an optimizer's
// limit keeper all act on one GpuSet (so a simulated GPU's clock and limit are one).
#pragma once

#include <memory>
#include <string>

#include "zeus/device/gpu_set.h"
#include "zeus/device/sim/sim_gpu_set.h"

namespace zeus::python {

struct GpusOptions {
  std::string locator = "auto";  // "auto", "nvml", "sim:<gpu>[:<workload>[:<bs>]][@state]"
  // Simulated GPUs only: a virtual clock that advances by the steps the optimizer sees
  // (run_steps), instead of the machine's clock.
  bool sim_virtual_clock = false;
};

class Gpus {
 public:
  explicit Gpus(const GpusOptions& options);

  device::GpuSet& set() { return *set_; }
  const std::shared_ptr<device::GpuSet>& shared() const { return set_; }
  // The simulated set, or nullptr on real GPUs.
  device::sim::SimGpuSet* sim() const { return sim_; }
  bool virtual_clock() const { return virtual_clock_; }
  // Virtual clock only: the latest of the GPUs' clocks, in s since the set was made.
  double sim_now_s() const;
  // Virtual clock only: each GPU runs `n` iterations at its current limit.
  void run_steps(int64_t n);
  // Virtual clock only: GPU `gpu` runs `n` iterations; the time they took, s (its own, no wait).
  double run_gpu_steps(int gpu, int64_t n);
  // Virtual clock only: GPU `gpu`'s clock, s; and idling it until `t_s` (a data-parallel step's
  // wait at the gradient sync for the slowest rank).
  double sim_gpu_now_s(int gpu) const;
  void sim_idle_until_s(int gpu, double t_s);
  // "zeusd at /run/zeusd/zeusd.sock" when limits are set through the node daemon, else "".
  std::string through_zeusd() const;

 private:
  std::shared_ptr<device::GpuSet> set_;
  device::sim::SimGpuSet* sim_ = nullptr;
  bool virtual_clock_ = false;
};

}  // namespace zeus::python
