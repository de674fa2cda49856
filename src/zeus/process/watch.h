// Watching a process that is not a child of ours (a lease holder, a job an optimizer keeps an eye
// on): told when it ends without reaping it, and never confused with a later process that got
// its pid. See Note [process supervision] in child.h.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>

#include "zeus/common/posix.h"

namespace zeus::process {

class ProcessWatch {
 public:
  // Watches `pid`. Throws ConfigError when no such process runs. Where the kernel has pidfds
  // the watch holds one (a pid reused meanwhile cannot fool it); elsewhere it keeps the
  // process's start time and checks it (/proc/PID/stat).
  explicit ProcessWatch(pid_t pid);

  pid_t pid() const { return pid_; }
  // Readable once the process has ended (a pidfd, for poll()); -1 without pidfds.
  int fd() const { return pidfd_.get(); }
  // Whether it still runs (a zombie has ended).
  bool alive() const;
  // Waits up to `timeout` for it to end; true when it has.
  [[nodiscard]] bool wait_for(std::chrono::nanoseconds timeout) const;

 private:
  pid_t pid_ = -1;
  UniqueFd pidfd_;
  std::optional<unsigned long long> start_ticks_;
};

// Waits up to `timeout` for `fd` to be readable (a pidfd), or, for fd -1, sleeps a short step
// (the caller polls the process itself): one wait of a polling loop.
void wait_readable(int fd, std::chrono::nanoseconds timeout);

// Whether the process behind pidfd `fd` still runs (its pidfd is not readable yet).
bool pidfd_alive(int fd);

// An id of the process behind pidfd `fd`, the same for every pidfd of that process and never
// another process's while the system runs: its inode on pidfs (Linux 6.9+). 0 where pidfds
// are anonymous inodes that all share one (Linux 6.5-6.8): the caller then tells them apart
// itself.
uint64_t pidfd_process_id(int fd);

// A pidfd for `pid` (pidfd_open), or an empty UniqueFd where the kernel has none (ENOSYS);
// throws IoError for other failures (ESRCH: no such process).
[[nodiscard]] UniqueFd open_pidfd(pid_t pid);

}  // namespace zeus::process
