#include "zeus/device/power_limit_guard.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <csignal>
#include <memory>
#include <set>
#include <thread>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/posix.h"
#include "zeus/common/signal_pipe.h"
#include "zeus/device/power_limit_journal.h"

namespace zeus::device {
namespace detail {

// Note [signal restore]: a signal handler may not lock or do I/O, so
//   1. SignalPipe's handler writes the signal number to a pipe;
//   2. this watcher thread, blocked in poll() on that pipe, wakes up;
//   3. it restores the limits of every live guard (each under its own mutex);
//   4. it gives the signal back to the previous action and raises it again, so the default
//      action (terminate with that signal) or the program's own handler runs as before.
// The watcher lives while at least one guard with restore_on_signal does.
class SignalRestorer {
 public:
  static SignalRestorer& instance() {
    static SignalRestorer restorer;
    return restorer;
  }

  void add(PowerLimitGuard* guard) {
    std::lock_guard life(life_mu_);
    if (!watcher_.joinable()) {
      start();
    }
    std::lock_guard lock(mu_);
    guards_.insert(guard);
  }

  void remove(PowerLimitGuard* guard) {
    std::lock_guard life(life_mu_);
    {
      std::lock_guard lock(mu_);
      guards_.erase(guard);
      if (!guards_.empty()) {
        return;
      }
    }
    // Last guard gone: stop the watcher (without mu_, which it may be waiting for) and give the
    // signals back.
    const char byte = 0;
    [[maybe_unused]] ssize_t n = ::write(wake_[1], &byte, 1);
    watcher_.join();
    pipe_.reset();
    ::close(wake_[0]);
    ::close(wake_[1]);
  }

 private:
  void start() {
    check_posix(::pipe2(wake_.data(), O_CLOEXEC), "creating wake pipe", "pipe2");
    // A signal the program ignores (SIGHUP under nohup) stays ignored: catching it would restore
    // the limits of a run that is meant to go on.
    std::vector<int> signals;
    for (const int signo : {SIGINT, SIGTERM, SIGHUP}) {
      struct sigaction current {};
      if (::sigaction(signo, nullptr, &current) == 0 && current.sa_handler != SIG_IGN) {
        signals.push_back(signo);
      }
    }
    pipe_ = std::make_unique<SignalPipe>(signals);
    watcher_ = std::thread([this, fd = pipe_->fd(), wake = wake_[0]] { watch(fd, wake); });
  }

  void watch(int signal_fd, int wake_fd) {
    std::array<pollfd, 2> fds{pollfd{signal_fd, POLLIN, 0}, pollfd{wake_fd, POLLIN, 0}};
    while (true) {
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        continue;  // EINTR
      }
      if ((fds[1].revents & POLLIN) != 0) {
        return;
      }
      unsigned char signo = 0;
      if ((fds[0].revents & POLLIN) == 0 || ::read(signal_fd, &signo, 1) != 1) {
        continue;
      }
      {
        std::lock_guard lock(mu_);
        for (PowerLimitGuard* guard : guards_) {
          guard->restore_after_signal(signo);
        }
        pipe_->reraise(signo);
      }
    }
  }

  std::mutex life_mu_;  // serializes add()/remove(): starting and stopping the watcher
  std::mutex mu_;       // guards_, and the restore a signal triggers
  std::set<PowerLimitGuard*> guards_;
  std::unique_ptr<SignalPipe> pipe_;
  std::array<int, 2> wake_{-1, -1};
  std::thread watcher_;
};

}  // namespace detail

PowerLimitGuard::PowerLimitGuard(GpuSet& gpus, PowerLimitGuardOptions options)
    : gpus_(gpus), options_(std::move(options)) {
  // What an earlier job left lowered goes back before this one reads "the limits it found".
  if (!options_.journal_path.empty()) {
    if (const auto settled = settle_stale_journal(options_.journal_path)) {
      logger().warn("{}", *settled);
    }
  }
  if (options_.restore_on_signal) {
    detail::SignalRestorer::instance().add(this);
  }
}

PowerLimitGuard::~PowerLimitGuard() {
  if (options_.restore_on_signal) {
    detail::SignalRestorer::instance().remove(this);
  }
  try {
    restore();
  } catch (const std::exception& e) {
    logger().error("{}", e.what());
  }
}

void PowerLimitGuard::set_power_limit_mw(int gpu, int64_t limit_mw) {
  std::lock_guard lock(mu_);
  if (interrupted_) {
    throw Error(fmt::format(
        "not setting GPU {} to {} mW: a signal arrived and the original limits were restored", gpu,
        limit_mw));
  }
  if (!originals_.contains(gpu)) {
    // Validate before journaling, so a bad value leaves no journal behind.
    gpus_.validate_power_limit_mw(gpu, limit_mw);
    originals_[gpu] = gpus_.power_limit_mw(gpu);
    if (!options_.journal_path.empty()) {
      PowerLimitJournal journal = journal_of_this_process(gpus_.locator());
      for (const auto& [index, mw] : originals_) {
        journal.gpus.push_back({index, gpus_.uuid(index), mw});
      }
      try {
        write_journal(options_.journal_path, journal);
      } catch (...) {
        originals_.erase(gpu);
        throw;
      }
    }
  }
  gpus_.set_power_limit_mw(gpu, limit_mw);
}

void PowerLimitGuard::restore() {
  std::lock_guard lock(mu_);
  restore_locked();
}

void PowerLimitGuard::restore_locked() {
  std::vector<std::string> failures;
  for (auto it = originals_.begin(); it != originals_.end();) {
    try {
      gpus_.set_power_limit_mw(it->first, it->second);
      it = originals_.erase(it);
    } catch (const std::exception& e) {
      failures.emplace_back(e.what());
      ++it;
    }
  }
  if (!failures.empty()) {
    throw DeviceError(
        fmt::format("could not restore power limits: {}{}", fmt::join(failures, "; "),
                    options_.journal_path.empty()
                        ? std::string("; restore them with nvidia-smi -pl")
                        : fmt::format("; retry with `zeus restore-limits --journal {}`",
                                      options_.journal_path.string())));
  }
  if (!options_.journal_path.empty()) {
    std::error_code ec;
    std::filesystem::remove(options_.journal_path, ec);
  }
}

std::map<int, int64_t> PowerLimitGuard::originals() const {
  std::lock_guard lock(mu_);
  return originals_;
}

void PowerLimitGuard::restore_after_signal(int signo) noexcept {
  std::lock_guard lock(mu_);
  interrupted_ = true;
  try {
    restore_locked();
  } catch (const std::exception& e) {
    logger().error("after signal {}: {}", signo, e.what());
  }
}

}  // namespace zeus::device
