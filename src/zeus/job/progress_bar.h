// The train loader's progress line on a terminal: epoch, steps, samples/s, power and the
// profiler's phase, redrawn in place (the global master's stderr, when it is a TTY).
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace zeus::optimize {
class PowerLimitProfiler;
}  // namespace zeus::optimize

namespace zeus::job {

// The bar's phase: what the profiler (null: measure-only) does at `limit_mw`.
std::string phase_text(const optimize::PowerLimitProfiler* profiler, int64_t limit_mw,
                       bool observer_mode);

// Contract: one per job, used from the training thread. step() is on the hot path: it returns
// without calling `power_w` or `phase` unless 200 ms passed since the last draw or the loop ended.
class ProgressBar {
 public:
  void step(int epoch, int max_epochs, std::string_view split, int64_t done, int64_t total,
            int64_t samples_per_step, const std::function<double()>& power_w,
            const std::function<std::string()>& phase);

 private:
  using Clock = std::chrono::steady_clock;
  Clock::time_point last_draw_{};
  Clock::time_point rate_t0_{};
  int64_t rate_done0_ = 0;
};

}  // namespace zeus::job
