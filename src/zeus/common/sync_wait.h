// The time this process spent waiting at data-parallel gradient syncs, so that a rank can tell
// its own step time (what its GPU needs) from the step time the slowest rank imposes on it.
// zeus::distributed::GradientSync adds each sync's wait; an energy job reads the total. A plain
// process-wide counter: zeus-cpp's ranks are one per process.
#pragma once

#include <chrono>

namespace zeus::sync_wait {

// Whether a reader wants the waits counted (GradientSync then waits for the rank's own compute
// before it starts the clock: on CUDA a stream synchronize per step). Off by default.
void arm(bool on);
bool armed();

// Adds one sync's wait.
void add(std::chrono::nanoseconds wait);
// Every wait added so far.
std::chrono::nanoseconds total();

}  // namespace zeus::sync_wait
