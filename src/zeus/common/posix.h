// The one checker for POSIX calls: converts -1/errno into a typed zeus error naming the call and
// the path, so every failing system call reads the same way.
#pragma once

#include <unistd.h>

#include <cerrno>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace zeus {

// strerror(errnum) as a string (thread-safe).
std::string errno_string(int errnum);

// Throws IoError (PermissionError for EACCES/EPERM) saying `what` failed on `path`.
[[noreturn]] void throw_posix_error(std::string_view what, std::string_view path, int errnum);

// Returns rc when rc != -1, else throws via throw_posix_error with the current errno.
template <typename T>
T check_posix(T rc, std::string_view what, std::string_view path) {
  if (rc == static_cast<T>(-1)) {
    throw_posix_error(what, path, errno);
  }
  return rc;
}

// Owns a file descriptor: closed on destruction or reset(); -1 means none.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  int get() const { return fd_; }
  // Gives up ownership (another owner closes it now) and returns the descriptor.
  [[nodiscard]] int release() { return std::exchange(fd_, -1); }
  void reset() {
    if (fd_ >= 0)
      ::close(fd_);
    fd_ = -1;
  }

 private:
  int fd_ = -1;
};

// Writes all of `data` to `fd`, across short writes and EINTR. Throws IoError (via
// throw_posix_error) saying `what` failed on `path`.
void write_all(int fd, std::string_view data, std::string_view what, std::string_view path);

// The host name of this machine, for error messages and journals.
std::string host_name();

// Closes every descriptor in [first, last] (last = ~0U: to the end), as close_range(2) does, on
// kernels before 5.9 too (RHEL 8's 4.18): there by walking /proc/self/fd. Never throws; for the
// moments after fork and before exec it allocates only on that old-kernel path.
void close_fd_range(unsigned first, unsigned last);

// This boot's id (/proc/sys/kernel/random/boot_id), or "" where the kernel has none: a journal
// written before a reboot is told from one of this boot by it.
std::string boot_id();

// When process `pid` started, in clock ticks since boot (/proc/PID/stat, field 22), or
// std::nullopt when there is no such process. With the pid it names a process for good: a pid
// the kernel reused for another process has another start time.
std::optional<unsigned long long> process_start_ticks(int pid);

// Whether `pid` runs (a zombie counts as gone), and when `start_ticks` is given, whether it is
// the process that started then.
bool process_alive(int pid, std::optional<unsigned long long> start_ticks = std::nullopt);

// The uid that owns process `pid` (its /proc entry), or std::nullopt when there is none.
std::optional<unsigned> process_uid(int pid);

}  // namespace zeus
