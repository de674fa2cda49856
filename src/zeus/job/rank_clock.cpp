#include "zeus/job/rank_clock.h"

#include "zeus/common/errors.h"
#include "zeus/device/sim/sim_gpu_set.h"

namespace zeus::job {

namespace {

// Note [the rank clock]: a simulated GPU is a workload model, not only a clock. Each step the
// rank ran is one iteration of the trace at the limit in force, which costs virtual time and
// energy (or, on the real clock, sleeps). The job counts steps on its hot path and hands the
// count over at the next sync point, where settle() runs them. That is exact because the limit
// only changes at sync points too (every rank settles before a limit is set), and the local
// master reads a window's energy only after every rank's clock ran its steps (the sync point's
// barrier). A reading's wall time stays the machine's even on the virtual clock: records are
// drawn against the power logs, which the machine's clock stamps (`zeus report` shades the
// profiling windows over them).
class SimClock final : public RankClock {
 public:
  SimClock(device::sim::SimGpuSet& sim, int gpu) : sim_(sim), gpu_(gpu) {}

  void settle(int64_t steps, bool busy) override {
    ZEUS_ASSERT(steps >= 0, "negative step count {}", steps);
    if (steps > 0) {
      sim_.run_iterations(gpu_, steps);
    }
    sim_.set_busy(gpu_, busy);
  }

  ClockReading now() override { return {sim_.now(gpu_), std::chrono::system_clock::now()}; }

 private:
  device::sim::SimGpuSet& sim_;
  int gpu_;
};

}  // namespace

ClockReading MachineClock::now() {
  return {std::chrono::steady_clock::now().time_since_epoch(), std::chrono::system_clock::now()};
}

std::unique_ptr<RankClock> make_rank_clock(NodeGpus& gpus) {
  if (device::sim::SimGpuSet* sim = gpus.sim_gpus()) {
    return std::make_unique<SimClock>(*sim, gpus.ranks().local_rank);
  }
  return std::make_unique<MachineClock>();
}

}  // namespace zeus::job
