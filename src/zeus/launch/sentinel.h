// What cleans up after a launcher that dies without the chance to (SIGKILL, the OOM killer, a
// node agent): a process of its own, started with the run, that outlives the launcher.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "zeus/common/posix.h"
#include "zeus/process/child.h"

namespace zeus::launch {

struct SentinelOptions {
  std::vector<std::filesystem::path> journal_dirs;  // where the node's workers journal limits
  int node_rank = 0;
  std::chrono::nanoseconds grace_period{};  // SIGTERM, then SIGKILL after this
  int err_fd = 2;                           // where it says what it did
  // The program whose `__guardian` argument runs launch::guardian_main (the zeus CLI's main
  // does): the launcher's own executable.
  std::string program = "/proc/self/exe";
};

// Note [the sentinel]: the launcher's guardian (Note [the guardian] in guardian.h), started by
// exec when a run starts and again whenever it died, in a session of its own (a signal to the
// launcher's process group, or the terminal's Ctrl-C, does not reach it). One pipe, the
// launcher writing "G <pgid> ...\n" once an attempt's workers started, "D\n" when the run is
// over; end of file without "D": the launcher died. The workers got SIGTERM from their
// PR_SET_PDEATHSIG already (so a zeus::DataLoader's guard restores its limits); the guardian
// sends every group SIGTERM too (reaching what the workers started), SIGKILL after the grace
// period, and then settles the node's power-limit journals as the launcher would have.
// The sentinel is a process::Child of the launcher, reaped by it alone; check() notices one that
// died (killed by hand, the OOM killer) and starts another, told the current groups. Started by
// exec, never by a bare fork: the launcher runs rendezvous threads by then.
// Contract: one per run, used from the launcher's thread.
class Sentinel {
 public:
  explicit Sentinel(SentinelOptions options);
  // Says "D" and reaps the sentinel.
  ~Sentinel();
  Sentinel(const Sentinel&) = delete;
  Sentinel& operator=(const Sentinel&) = delete;

  // The current attempt's worker process groups.
  void watch(const std::vector<pid_t>& pgids);
  pid_t pid() const { return child_.pid(); }
  // When the sentinel has died: starts another and says what happened (for the launcher to
  // print); std::nullopt while it runs.
  std::optional<std::string> check();

 private:
  void start();

  SentinelOptions options_;
  UniqueFd pipe_;  // write end
  process::Child child_;
  std::vector<pid_t> groups_;
};

}  // namespace zeus::launch
