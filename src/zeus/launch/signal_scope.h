// SignalScope: the launcher's signals (SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2) read
// from a signalfd for the scope's lifetime, SIGPIPE ignored. Internal to launch/ (supervisor.cpp).
#pragma once

#include <signal.h>
#include <sys/signalfd.h>
#include <unistd.h>

#include <array>

#include "zeus/common/posix.h"

namespace zeus::launch {

inline constexpr std::array kHandledSignals = {SIGCHLD, SIGINT, SIGTERM, SIGHUP, SIGUSR1, SIGUSR2};

// Blocks the handled signals and reads them from a signalfd for the lifetime of the object;
// ignores SIGPIPE (a closed console must not kill the launcher).
class SignalScope {
 public:
  SignalScope() {
    sigset_t set;
    ::sigemptyset(&set);
    for (int sig : kHandledSignals)
      ::sigaddset(&set, sig);
    check_posix(::sigprocmask(SIG_BLOCK, &set, &old_mask_), "sigprocmask", "zeus run");
    fd_ = UniqueFd(
        check_posix(::signalfd(-1, &set, SFD_CLOEXEC | SFD_NONBLOCK), "signalfd", "zeus run"));
    struct sigaction ignore {};
    ignore.sa_handler = SIG_IGN;
    ::sigaction(SIGPIPE, &ignore, &old_pipe_);
  }
  ~SignalScope() {
    // Drop what is still pending (a late SIGCHLD, a SIGTERM already answered) before unblocking.
    signalfd_siginfo info{};
    while (::read(fd_.get(), &info, sizeof(info)) > 0) {
    }
    ::sigaction(SIGPIPE, &old_pipe_, nullptr);
    ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
  }
  SignalScope(const SignalScope&) = delete;
  SignalScope& operator=(const SignalScope&) = delete;
  int fd() const { return fd_.get(); }

 private:
  sigset_t old_mask_{};
  struct sigaction old_pipe_ {};
  UniqueFd fd_;
};

}  // namespace zeus::launch
