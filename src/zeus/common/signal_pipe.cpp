#include "zeus/common/signal_pipe.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <atomic>

#include "zeus/common/errors.h"
#include "zeus/common/posix.h"

namespace zeus {
namespace {

// The pipe each signal's byte goes to, plus one (so zero-initialized means none).
std::array<std::atomic<int>, NSIG> g_write_fd_plus_one{};

void on_signal(int signo) {
  const int saved_errno = errno;
  const int fd = g_write_fd_plus_one[static_cast<size_t>(signo)].load() - 1;
  if (fd >= 0) {
    const auto byte = static_cast<unsigned char>(signo);
    [[maybe_unused]] ssize_t n = ::write(fd, &byte, 1);
  }
  errno = saved_errno;
}

}  // namespace

SignalPipe::SignalPipe(const std::vector<int>& signals) {
  std::array<int, 2> fds{};
  check_posix(::pipe2(fds.data(), O_CLOEXEC | O_NONBLOCK), "creating signal pipe", "pipe2");
  read_fd_ = fds[0];
  write_fd_ = fds[1];
  for (const int signo : signals) {
    ZEUS_ASSERT(signo > 0 && signo < NSIG, "signal {} out of range", signo);
    Saved saved{signo,
                {},
                g_write_fd_plus_one[static_cast<size_t>(signo)].exchange(write_fd_ + 1) - 1,
                false};
    struct sigaction action {};
    action.sa_handler = on_signal;
    sigemptyset(&action.sa_mask);
    action.sa_flags = SA_RESTART;
    ::sigaction(signo, &action, &saved.action);
    saved_.push_back(saved);
  }
}

SignalPipe::~SignalPipe() {
  for (auto it = saved_.rbegin(); it != saved_.rend(); ++it) {
    restore(*it);
  }
  ::close(read_fd_);
  ::close(write_fd_);
}

void SignalPipe::restore(Saved& saved) {
  if (saved.restored) {
    return;
  }
  ::sigaction(saved.signo, &saved.action, nullptr);
  g_write_fd_plus_one[static_cast<size_t>(saved.signo)].store(saved.write_fd + 1);
  saved.restored = true;
}

int SignalPipe::wait_for(std::chrono::nanoseconds timeout) {
  pollfd pfd{read_fd_, POLLIN, 0};
  const int timeout_ms =
      timeout.count() < 0
          ? -1
          : static_cast<int>(std::chrono::ceil<std::chrono::milliseconds>(timeout).count());
  const int rc = ::poll(&pfd, 1, timeout_ms);
  if (rc <= 0) {
    return 0;  // timeout, or EINTR: the caller re-checks its deadline
  }
  unsigned char byte = 0;
  if (::read(read_fd_, &byte, 1) == 1) {
    return byte;
  }
  return 0;
}

void SignalPipe::reraise(int signo) {
  for (auto& saved : saved_) {
    if (saved.signo == signo) {
      restore(saved);
    }
  }
  ::raise(signo);
}

}  // namespace zeus
