#include "zeus/optimize/power_limit_profiler.h"

#include <fmt/format.h>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"

namespace zeus::optimize {

namespace ps = profiler_state;

std::vector<int64_t> candidate_limits_mw(PowerLimitRange range, int64_t step_mw) {
  if (step_mw <= 0) {
    throw ConfigError(fmt::format("power-limit step {} mW must be positive", step_mw));
  }
  if (range.min_mw <= 0 || range.min_mw > range.max_mw) {
    throw ConfigError(
        fmt::format("power-limit range {}-{} mW is empty", range.min_mw, range.max_mw));
  }
  std::vector<int64_t> out;
  for (int64_t mw = range.max_mw; mw > range.min_mw; mw -= step_mw) {
    out.push_back(mw);
  }
  out.push_back(range.min_mw);
  return out;
}

std::optional<std::pair<int64_t, int64_t>> fit_windows(int64_t warmup, int64_t profile,
                                                       int64_t iterations) {
  const int64_t total = warmup + profile;
  if (iterations >= total) {
    return std::pair{warmup, profile};
  }
  const int64_t w = warmup * iterations / total;
  const int64_t p = profile * iterations / total;
  if (w < 1 || p < 1) {
    return std::nullopt;
  }
  return std::pair{w, p};
}

PowerLimitProfiler::PowerLimitProfiler(PowerLimitRange range_mw, CostModel cost,
                                       ProfilerOptions options)
    : range_(range_mw),
      cost_(cost),
      options_(options),
      candidates_(candidate_limits_mw(range_mw, options.step_mw)),
      state_(ps::Ready{0}),
      warmup_(options.warmup_iters),
      profile_(options.profile_iters) {
  if (warmup_ < 1 || profile_ < 1) {
    throw ConfigError(fmt::format(
        "profile window ({} warmup, {} profiling iterations): both must be at least 1, as in "
        "ZEUS_PROFILE_PARAMS=\"10,40\"",
        warmup_, profile_));
  }
}

void PowerLimitProfiler::check_nothing_owed(const char* event) const {
  ZEUS_ASSERT(owed_ == Owed::kNothing,
              "{} while a window's measurement is owed (the shell must call "
              "on_window_measured first)",
              event);
}

profiler_action::SetLimit PowerLimitProfiler::load(const PowerProfile& profile) {
  check_nothing_owed("load");
  measurements_.clear();
  for (const auto& [mw, m] : profile.train) {
    measurements_.push_back(m);
  }
  eval_throughput_ips_ = profile.eval_throughput_ips;
  eval_power_w_ = profile.eval_power_w;
  return finish();
}

MaybeAction PowerLimitProfiler::on_epoch_begin(int64_t iterations) {
  check_nothing_owed("on_epoch_begin");
  ZEUS_ASSERT(iterations >= 0, "negative epoch length {}", iterations);
  steps_left_in_epoch_ = iterations;
  if (done() || iterations >= warmup_ + profile_) {
    return std::nullopt;
  }
  // Shrink both windows in proportion so one limit fits in an epoch of this length.
  const auto fitted = fit_windows(warmup_, profile_, iterations);
  if (!fitted) {
    throw ConfigError(fmt::format(
        "an epoch of {} iterations is too short to profile a power limit ({} warmup + {} "
        "profiling iterations even after shrinking); use a smaller batch size, or lower "
        "ZEUS_PROFILE_PARAMS",
        iterations, warmup_, profile_));
  }
  const int warmup = static_cast<int>(fitted->first);
  const int profile = static_cast<int>(fitted->second);
  logger().info("epoch of {} iterations: profiling window shrunk from {}+{} to {}+{}", iterations,
                warmup_, profile_, warmup, profile);
  warmup_ = warmup;
  profile_ = profile;
  return std::nullopt;
}

MaybeAction PowerLimitProfiler::on_step_begin() {
  check_nothing_owed("on_step_begin");
  if (const auto* ready = std::get_if<ps::Ready>(&state_)) {
    // Start a limit only if its whole window fits in what is left of the epoch.
    if (steps_left_in_epoch_ >= warmup_ + profile_) {
      const size_t index = ready->index;
      state_ = ps::Warmup{index, warmup_};
      return profiler_action::SetLimit{candidates_[index]};
    }
  }
  return std::nullopt;
}

MaybeAction PowerLimitProfiler::on_step_end() {
  check_nothing_owed("on_step_end");
  --steps_left_in_epoch_;
  if (auto* warmup = std::get_if<ps::Warmup>(&state_)) {
    if (--warmup->left == 0) {
      state_ = ps::Profiling{warmup->index, profile_};
      return profiler_action::BeginWindow{};
    }
  } else if (auto* profiling = std::get_if<ps::Profiling>(&state_)) {
    if (--profiling->left == 0) {
      owed_ = Owed::kTrainWindow;
      return profiler_action::EndWindow{};
    }
  }
  return std::nullopt;
}

MaybeAction PowerLimitProfiler::on_window_measured(const WindowMeasurement& w) {
  const double seconds = w.elapsed.count();
  switch (owed_) {
    case Owed::kNothing:
      ZEUS_ASSERT(false, "a window's measurement arrived, but no window was closed");
      return std::nullopt;
    case Owed::kEvalWindow:
      owed_ = Owed::kNothing;
      if (seconds > 0 && eval_iterations_ > 0) {
        eval_throughput_ips_ = static_cast<double>(eval_iterations_) / seconds;
        eval_power_w_ = w.energy_j / seconds;
      }
      return std::nullopt;
    case Owed::kTrainWindow:
      break;
  }
  owed_ = Owed::kNothing;
  const auto* profiling = std::get_if<ps::Profiling>(&state_);
  ZEUS_ASSERT(profiling != nullptr, "a train window was measured outside profiling");
  const size_t index = profiling->index;
  if (!(seconds > 0)) {
    throw DeviceError(fmt::format(
        "profiling window at {} mW measured {} s for {} iterations; the clock or the energy "
        "source is broken",
        candidates_[index], seconds, profile_));
  }
  measurements_.push_back({candidates_[index], profile_ / seconds, w.energy_j / seconds});
  if (index + 1 < candidates_.size()) {
    state_ = ps::Ready{index + 1};
    return std::nullopt;
  }
  return finish();
}

MaybeAction PowerLimitProfiler::on_epoch_end() {
  check_nothing_owed("on_epoch_end");
  steps_left_in_epoch_ = 0;
  // A window never straddles an epoch; if the epoch ended early (fewer steps than announced),
  // cancel the unfinished window and redo that limit in the next epoch.
  if (const auto* warmup = std::get_if<ps::Warmup>(&state_)) {
    state_ = ps::Ready{warmup->index};
  } else if (const auto* profiling = std::get_if<ps::Profiling>(&state_)) {
    state_ = ps::Ready{profiling->index};
    return profiler_action::CancelWindow{};
  }
  return std::nullopt;
}

MaybeAction PowerLimitProfiler::on_eval_begin() {
  check_nothing_owed("on_eval_begin");
  if (done() && !eval_throughput_ips_ && !eval_window_open_) {
    eval_window_open_ = true;
    return profiler_action::BeginWindow{};
  }
  return std::nullopt;
}

MaybeAction PowerLimitProfiler::on_eval_end(int64_t iterations) {
  check_nothing_owed("on_eval_end");
  if (!eval_window_open_) {
    return std::nullopt;
  }
  eval_window_open_ = false;
  eval_iterations_ = iterations;
  owed_ = Owed::kEvalWindow;
  return profiler_action::EndWindow{};
}

profiler_action::SetLimit PowerLimitProfiler::finish() {
  optimal_mw_ = select_power_limit(measurements_, cost_, options_.selector);
  state_ = ps::Done{};
  return {options_.use_optimal_limit ? *optimal_mw_ : range_.max_mw};
}

PowerProfile PowerLimitProfiler::profile(int64_t global_batch_size) const {
  ZEUS_ASSERT(done(), "profile requested before profiling finished");
  PowerProfile p;
  p.global_batch_size = global_batch_size;
  for (const auto& m : measurements_) {
    p.train[m.power_limit_mw] = m;
  }
  p.optimal_power_limit_mw = *optimal_mw_;
  p.eval_throughput_ips = eval_throughput_ips_;
  p.eval_power_w = eval_power_w_;
  return p;
}

}  // namespace zeus::optimize
