// RankClock: the one clock a rank's measurements are read on, injected into the job. A window
// opens and closes with one reading each; both the time it measures (monotonic) and the wall
// time its record carries come from that reading, taken at one instant. The machine's clock is one
// implementation, a simulated GPU's virtual clock another: the job's step calls only count steps,
// and the clock is told how many ran when it is read (Note [the rank clock]).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <optional>

#include "zeus/job/collectives.h"
#include "zeus/job/node_gpus.h"

namespace zeus::job {

struct ClockReading {
  std::chrono::nanoseconds monotonic{0};  // differences of these are measured durations
  // Where the reading lies on the power logs' clock (the machine's wall clock), for the records
  // drawn against them.
  std::chrono::system_clock::time_point wall;
};

// Contract: used from the rank's thread only at the job's sync points, never per step.
//  - settle(steps, busy) where the job waits for the rank's device (before the barrier that lets
//    the local master read energy or set a limit): the rank ran `steps` steps since the previous
//    settle, and its device works (`busy`, inside a train or eval loop) or idles from now on.
//  - now() after that barrier, so that every rank's reading of a window's edge is taken at the
//    same moment.
//  - own_time() after settle(): the time the rank's device spent on its own steps so far, not
//    counting waits at the gradient sync for slower ranks; differences of it are what a span of
//    steps costs this rank alone (the per-GPU planner's step time).
//  - device_clock()/wait_until(): a simulated device's virtual clock, and idling it until the
//    slowest rank's (the gradient sync's wait, Note [the rank clock]); the machine's clocks
//    have none: their waits are real.
class RankClock {
 public:
  virtual ~RankClock() = default;
  virtual void settle(int64_t steps, bool busy) = 0;
  virtual ClockReading now() = 0;
  virtual std::chrono::nanoseconds own_time() = 0;
  virtual std::optional<std::chrono::nanoseconds> device_clock() { return std::nullopt; }
  virtual void wait_until(std::chrono::nanoseconds /*t*/) {}
};

// The machine's clocks (steady and system), read at the same instant; settle() has nothing to
// do (the device's own synchronize waited for its work). Its own time is the steady clock less
// the waits zeus::distributed::GradientSync counted (common/sync_wait.h): on CUDA each sync first
// waits for the rank's compute stream, so the wait holds only the time spent on the slower
// ranks and the transfer.
class MachineClock final : public RankClock {
 public:
  void settle(int64_t /*steps*/, bool /*busy*/) override {}
  ClockReading now() override;
  std::chrono::nanoseconds own_time() override;
};

// The clock for what a rank trains on: the simulated GPU's when it is simulated (its steps are
// run there, so time, energy and the local master's limits all follow the trace), the
// machine's otherwise.
std::unique_ptr<RankClock> make_rank_clock(NodeGpus& gpus);

// Collective, at a sync point after settle(): the simulated clocks joined at the slowest rank's
// (each simulated GPU idles until then, as the gradient sync would have made it, and a barrier
// follows so every wait is charged before a local master reads the node's energy); real clocks
// have nothing to join. Returns this rank's reading there.
ClockReading join_clocks(RankClock& clock, Collectives& collectives);

}  // namespace zeus::job
