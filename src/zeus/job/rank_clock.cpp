#include "zeus/job/rank_clock.h"

#include <algorithm>
#include <vector>

#include "zeus/common/errors.h"
#include "zeus/common/sync_wait.h"
#include "zeus/device/sim/sim_gpu_set.h"
#include "zeus/job/messages.h"

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
//
// Data-parallel steps wait for the slowest rank at the gradient sync. Each rank's steps run on
// its own GPU's clock at that GPU's pace (its limit, its slowdown); at every sync point the
// ranks' clocks are brought to the slowest one's, the others idling meanwhile at their idle
// power (EnergyJob's align()). Between two sync points every step of a rank takes the same
// time (limits change only at sync points), so idling once for the sum of the per-step waits
// is exact; a slowdown changed mid-span (a test standing for heat) is charged from the next
// sync point on.
class SimClock final : public RankClock {
 public:
  SimClock(device::sim::SimGpuSet& sim, int gpu) : sim_(sim), gpu_(gpu) {}

  void settle(int64_t steps, bool busy) override {
    ZEUS_ASSERT(steps >= 0, "negative step count {}", steps);
    if (steps > 0) {
      own_ += sim_.run_iterations(gpu_, steps);
    }
    busy_ = busy;
    sim_.set_busy(gpu_, busy);
  }

  ClockReading now() override { return {sim_.now(gpu_), std::chrono::system_clock::now()}; }
  std::chrono::nanoseconds own_time() override { return own_; }

  // The real clock waits in real time at the barrier itself.
  std::optional<std::chrono::nanoseconds> device_clock() override {
    if (sim_.options().clock != device::SimClock::kVirtual) {
      return std::nullopt;
    }
    return sim_.now(gpu_);
  }

  void wait_until(std::chrono::nanoseconds t) override {
    const auto now = sim_.now(gpu_);
    if (t > now) {
      sim_.idle(gpu_, t - now);
      sim_.set_busy(gpu_, busy_);
    }
  }

 private:
  device::sim::SimGpuSet& sim_;
  int gpu_;
  std::chrono::nanoseconds own_{0};
  bool busy_ = false;
};

}  // namespace

ClockReading MachineClock::now() {
  return {std::chrono::steady_clock::now().time_since_epoch(), std::chrono::system_clock::now()};
}

std::chrono::nanoseconds MachineClock::own_time() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch()) -
         sync_wait::total();
}

std::unique_ptr<RankClock> make_rank_clock(NodeGpus& gpus) {
  if (device::sim::SimGpuSet* sim = gpus.sim_gpus()) {
    return std::make_unique<SimClock>(*sim, gpus.ranks().local_rank);
  }
  return std::make_unique<MachineClock>();
}

ClockReading join_clocks(RankClock& clock, Collectives& collectives) {
  const RankInfo ranks = collectives.ranks();
  const auto mine = clock.device_clock();
  std::vector<double> clocks = per_rank_slots(ranks);
  if (mine) {
    clocks[static_cast<size_t>(ranks.rank)] = static_cast<double>(mine->count());
  }
  collectives.all_reduce_sum(clocks);
  if (mine) {
    clock.wait_until(std::chrono::nanoseconds{
        static_cast<int64_t>(*std::max_element(clocks.begin(), clocks.end()))});
    barrier(collectives);
  }
  return clock.now();
}

}  // namespace zeus::job
