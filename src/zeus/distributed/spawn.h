// Starting n workers on this machine from inside a program, as torch.multiprocessing.spawn /
// --multiprocessing-distributed do.
#pragma once

#include <chrono>
#include <functional>

#include "zeus/distributed/context.h"

namespace zeus::distributed {

struct SpawnOptions {
  int nprocs = 1;
  InitOptions init;  // how each worker joins (device, backend, timeouts); env is set by spawn
  // After the first worker fails, the others get SIGTERM, and SIGKILL when they are still
  // running this much later.
  std::chrono::nanoseconds grace_period = std::chrono::seconds(10);
};

// Re-executes this program (/proc/self/exe, same arguments) nprocs times with torchrun's
// variables for ranks 0..nprocs-1 on a free loopback port, rather than fork()ing after libtorch
// started its thread pools (which can deadlock the child). In the parent, returns 0 once every
// worker succeeded, or throws PeerFailed naming the first worker that failed (its rank and exit
// code or signal) after stopping the others. The workers get SIGTERM when the thread that called
// spawn ends (PR_SET_PDEATHSIG), so a killed parent leaves no ranks behind. In a worker
// (re-executed with ZEUS_SPAWN_WORKER set), joins the job, runs fn, and returns 0. Use it as
// `return zeus::distributed::spawn(...)` from main, before the program does anything only the
// parent should do.
[[nodiscard]] int spawn(const SpawnOptions& options, const std::function<void(Context&)>& fn);

}  // namespace zeus::distributed
