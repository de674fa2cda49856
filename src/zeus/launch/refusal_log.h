// Warnings about refused peers (a rendezvous's bad input: strangers, wrong tokens, garbage), at
// most kBurst per kWindow; the rest are counted and summed up in the next window's first line,
// so that a flood cannot flood the log. Contract: one thread at a time.
#pragma once

#include <chrono>
#include <string>

#include "zeus/common/logging.h"

namespace zeus::launch {

class RefusalLog {
 public:
  explicit RefusalLog(std::string what) : what_(std::move(what)) {}
  // `peer` is who (an address, a key), `why` what was wrong.
  void refused(const std::string& peer, const std::string& why) {
    const auto now = std::chrono::steady_clock::now();
    if (now - window_start_ > kWindow) {
      if (suppressed_ > 0) {
        logger().warn("{}: {} more refusal(s) in the last {} s", what_, suppressed_,
                      kWindow.count());
      }
      window_start_ = now;
      logged_ = 0;
      suppressed_ = 0;
    }
    if (logged_ < kBurst) {
      ++logged_;
      ++total_;
      logger().warn("{}: refused {}: {}", what_, peer, why);
    } else {
      ++suppressed_;
      ++total_;
    }
  }
  long total() const { return total_; }

 private:
  static constexpr int kBurst = 20;
  static constexpr std::chrono::seconds kWindow{10};
  std::string what_;  // e.g. "rendezvous 'job7'"
  std::chrono::steady_clock::time_point window_start_{};
  int logged_ = 0;
  int suppressed_ = 0;
  long total_ = 0;
};

}  // namespace zeus::launch
