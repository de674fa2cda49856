// RankClock: the one clock a rank's measurements are read on, injected into the job. A window
// opens and closes with one reading each; both the time it measures (monotonic) and the wall
// time its record carries come from that reading, taken at one instant. The machine's clock is one
// implementation, a simulated GPU's virtual clock another: the job's step calls only count steps,
// and the clock is told how many ran when it is read (Note [the rank clock]).
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

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
class RankClock {
 public:
  virtual ~RankClock() = default;
  virtual void settle(int64_t steps, bool busy) = 0;
  virtual ClockReading now() = 0;
};

// The machine's clocks (steady and system), read at the same instant; settle() has nothing to
// do (the device's own synchronize waited for its work).
class MachineClock final : public RankClock {
 public:
  void settle(int64_t /*steps*/, bool /*busy*/) override {}
  ClockReading now() override;
};

// The clock for what a rank trains on: the simulated GPU's when it is simulated (its steps are
// run there, so time, energy and the local master's limits all follow the trace), the
// machine's otherwise.
std::unique_ptr<RankClock> make_rank_clock(NodeGpus& gpus);

}  // namespace zeus::job
