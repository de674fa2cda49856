#include "zeus/job/progress_bar.h"

#include <fmt/format.h>

#include <cstdio>
#include <variant>

#include "zeus/common/power.h"
#include "zeus/optimize/power_limit_profiler.h"

namespace zeus::job {

std::string phase_text(const optimize::PowerLimitProfiler* profiler, int64_t limit_mw,
                       bool observer_mode) {
  namespace ps = optimize::profiler_state;
  const double w = mw_to_w(limit_mw);
  if (profiler == nullptr) {
    return fmt::format("measure-only, at {} W", w);
  }
  const auto& state = profiler->state();
  if (std::holds_alternative<ps::Warmup>(state)) {
    return fmt::format("warmup {} W", w);
  }
  if (std::holds_alternative<ps::Profiling>(state)) {
    return fmt::format("profiling {} W", w);
  }
  if (std::holds_alternative<ps::Ready>(state)) {
    return fmt::format("profiling (next limit) {} W", w);
  }
  return fmt::format("{} {} W", observer_mode ? "observer, at" : "optimal", w);
}

void ProgressBar::step(int epoch, int max_epochs, std::string_view split, int64_t done,
                       int64_t total, int64_t samples_per_step,
                       const std::function<double()>& power_w,
                       const std::function<std::string()>& phase) {
  const auto now = Clock::now();
  if (done != total && now - last_draw_ < std::chrono::milliseconds(200)) {
    return;
  }
  if (done == 1 || rate_t0_ == Clock::time_point{}) {
    rate_t0_ = now;
    rate_done0_ = done;
  }
  last_draw_ = now;
  const double dt = std::chrono::duration<double>(now - rate_t0_).count();
  const double rate =
      dt > 0 ? static_cast<double>((done - rate_done0_) * samples_per_step) / dt : 0;
  const int width = 24;
  const int filled = total > 0 ? static_cast<int>(width * done / total) : 0;
  std::string bar(static_cast<size_t>(filled), '#');
  bar.resize(width, '.');
  std::fprintf(stderr, "\r\033[Kepoch %d/%d %s [%s] %lld/%lld  %.0f samples/s  %.0f W  %s",
               epoch + 1, max_epochs, std::string(split).c_str(), bar.c_str(),
               static_cast<long long>(done), static_cast<long long>(total), rate, power_w(),
               phase().c_str());
  if (done == total) {
    std::fputc('\n', stderr);
    rate_t0_ = {};
  }
}

}  // namespace zeus::job
