#include "zeus/process/watch.h"

#include <fmt/format.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <thread>

#include "zeus/common/errors.h"

namespace zeus::process {

UniqueFd open_pidfd(pid_t pid) {
#ifdef SYS_pidfd_open
  const long fd = ::syscall(SYS_pidfd_open, pid, 0);
  if (fd >= 0) {
    return UniqueFd(static_cast<int>(fd));
  }
  if (errno == ENOSYS) {
    return {};
  }
  throw_posix_error("pidfd_open", fmt::format("pid {}", pid), errno);
#else
  (void)pid;
  return {};
#endif
}

bool pidfd_alive(int fd) {
  pollfd pfd{fd, POLLIN, 0};
  return ::poll(&pfd, 1, 0) == 0;
}

uint64_t pidfd_process_id(int fd) {
  constexpr long kPidfsMagic = 0x50494446;  // "PIDF" (linux/magic.h, not in bookworm's)
  struct statfs fs {};
  struct stat st {};
  if (::fstatfs(fd, &fs) != 0 || static_cast<long>(fs.f_type) != kPidfsMagic ||
      ::fstat(fd, &st) != 0) {
    return 0;
  }
  return static_cast<uint64_t>(st.st_ino);
}

void wait_readable(int fd, std::chrono::nanoseconds timeout) {
  if (fd >= 0) {
    pollfd pfd{fd, POLLIN, 0};
    const auto ms = std::chrono::ceil<std::chrono::milliseconds>(timeout).count();
    ::poll(&pfd, 1, static_cast<int>(std::clamp<int64_t>(ms, 0, 60'000)));
  } else {
    std::this_thread::sleep_for(
        std::min<std::chrono::nanoseconds>(timeout, std::chrono::milliseconds(5)));
  }
}

ProcessWatch::ProcessWatch(pid_t pid) : pid_(pid) {
  if (pid <= 0) {
    throw ConfigError(fmt::format("cannot watch pid {}: not a process id", pid));
  }
  start_ticks_ = process_start_ticks(pid);
  try {
    pidfd_ = open_pidfd(pid);
  } catch (const IoError&) {
    start_ticks_.reset();  // ESRCH: gone already
  }
  if (!start_ticks_ || !alive()) {
    throw ConfigError(fmt::format("cannot watch pid {}: no such process", pid));
  }
}

bool ProcessWatch::alive() const {
  if (pidfd_.get() >= 0) {
    return pidfd_alive(pidfd_.get());
  }
  return process_alive(pid_, start_ticks_);
}

bool ProcessWatch::wait_for(std::chrono::nanoseconds timeout) const {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (alive()) {
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left <= std::chrono::nanoseconds(0)) {
      return false;
    }
    wait_readable(pidfd_.get(), left);
  }
  return true;
}

}  // namespace zeus::process
