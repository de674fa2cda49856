// Turns signals (SIGINT, SIGTERM, ...) into bytes on a pipe, so that the work a signal asks for
// (restore power limits, finish a log file) runs on an ordinary thread: the handler itself only
// write()s the signal number, which is async-signal-safe.
//
// Contract: construct and destroy on one thread; wait_for() and fd() may be used from any one
// thread. Instances nest: a newer instance for the same signal takes over and, on destruction,
// gives the signal back to the older one (or to the action that was there before).
#pragma once

#include <chrono>
#include <csignal>
#include <vector>

namespace zeus {

class SignalPipe {
 public:
  explicit SignalPipe(const std::vector<int>& signals);
  ~SignalPipe();
  SignalPipe(const SignalPipe&) = delete;
  SignalPipe& operator=(const SignalPipe&) = delete;

  // Readable when a signal arrived.
  int fd() const { return read_fd_; }

  // Waits up to `timeout` (negative: forever) for a signal. Returns its number, or 0 on timeout.
  int wait_for(std::chrono::nanoseconds timeout);

  // Gives the signal back to the action that was installed before this instance, then raises
  // it, so a default action (terminate) or an outer handler runs as if we had not been there.
  void reraise(int signo);

 private:
  struct Saved {
    int signo;
    struct sigaction action;
    int write_fd;
    bool restored;
  };
  void restore(Saved& saved);

  int read_fd_ = -1;
  int write_fd_ = -1;
  std::vector<Saved> saved_;
};

}  // namespace zeus
