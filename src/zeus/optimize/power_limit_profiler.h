// Just-in-time power-limit profiling: during the first epochs of training, run each candidate
// limit for a warmup and a profiling window, measure throughput and power, then keep the
// cheapest limit. A pure state machine driven by the training loop's events: each event returns
// what to do (set a limit, open, close or cancel a window), and a shell (job/energy_job.cpp over
// the node's GPUs and the collectives; a fake in the tests) carries it out and reports a closed
// window's measurement back. No clock, no device, no I/O here.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <utility>
#include <variant>
#include <vector>

#include "zeus/common/power.h"
#include "zeus/optimize/cost.h"
#include "zeus/optimize/power_profile.h"

namespace zeus::optimize {

// Elapsed wall time (after the device finished the work) and energy of all the job's GPUs.
struct WindowMeasurement {
  std::chrono::duration<double> elapsed{0};
  double energy_j = 0;
};

// What the profiler asks of its shell. On data-parallel runs every rank's profiler asks the same
// at the same step; the shell sets the limits of the node's GPUs and measures the job's energy
// (sum over nodes) and time (max over ranks).
namespace profiler_action {
struct SetLimit {
  int64_t limit_mw;
};
// Opens a window: its time and energy are measured from here.
struct BeginWindow {};
// Closes the open window and measures it; the shell must hand the measurement to
// PowerLimitProfiler::on_window_measured() before the next event.
struct EndWindow {};
// Closes the open window without a measurement (the epoch ended inside it): nothing of it may be
// recorded anywhere (Zeus's end_window(cancel=True)).
struct CancelWindow {};
}  // namespace profiler_action
using ProfilerAction = std::variant<profiler_action::SetLimit, profiler_action::BeginWindow,
                                    profiler_action::EndWindow, profiler_action::CancelWindow>;
// At most one action per event.
using MaybeAction = std::optional<ProfilerAction>;

struct ProfilerOptions {
  int warmup_iters = 10;  // ZEUS_PROFILE_PARAMS="10,40"
  int profile_iters = 40;
  int64_t step_mw = 25'000;  // candidate spacing
  SelectorOptions selector;
  bool use_optimal_limit = true;  // false: observer mode (profile, but stay at the maximum)
};

// Candidate limits from the maximum down to the minimum in steps of step_mw, never below the
// minimum (the minimum itself is always a candidate).
std::vector<int64_t> candidate_limits_mw(PowerLimitRange range, int64_t step_mw);

// The windows for an epoch of `iterations`: warmup and profile unchanged when one limit's window
// fits, else both shrunk in proportion (integer division); nullopt when either would reach 0.
// The profiler applies it; the simulator's windows fidelity charges the same windows.
std::optional<std::pair<int64_t, int64_t>> fit_windows(int64_t warmup, int64_t profile,
                                                       int64_t iterations);

// The profiler's states. Transitions (Note [profiler states]):
//   Ready{i} --on_step_begin, window fits in the epoch--> Warmup{i}   (sets candidate i)
//   Warmup{i} --warmup_iters steps end--> Profiling{i}                (begins the window)
//   Profiling{i} --profile_iters steps end--> Ready{i+1} or Done      (ends and records it)
//   Warmup/Profiling --epoch ends early--> Ready{i}                   (the window is cancelled)
//   Done: the optimal limit (or the maximum in observer mode) is set; the first eval epoch
//   after Done is measured at it.
namespace profiler_state {
struct Ready {
  size_t index;
};
struct Warmup {
  size_t index;
  int left;
};
struct Profiling {
  size_t index;
  int left;
};
struct Done {};
}  // namespace profiler_state
using ProfilerState = std::variant<profiler_state::Ready, profiler_state::Warmup,
                                   profiler_state::Profiling, profiler_state::Done>;

// Contract: call from the training loop's thread, in order: on_epoch_begin(n), then per step
// on_step_begin()/on_step_end(), then on_epoch_end(); eval epochs between on_eval_begin() and
// on_eval_end(n). Each returns what the shell does next; after an EndWindow the shell calls
// on_window_measured() (which may return the final SetLimit) before any other event. Throws
// ConfigError when an epoch is too short for even a shrunk window, DeviceError when a window
// measured no time, InternalError when the order is broken.
class PowerLimitProfiler {
 public:
  PowerLimitProfiler(PowerLimitRange range_mw, CostModel cost, ProfilerOptions options);

  // Skips profiling: the limits were measured before (the saved bs{B}.power.json). Returns the
  // limit to run at.
  [[nodiscard]] profiler_action::SetLimit load(const PowerProfile& profile);

  [[nodiscard]] MaybeAction on_epoch_begin(int64_t iterations);
  [[nodiscard]] MaybeAction on_step_begin();
  [[nodiscard]] MaybeAction on_step_end();
  [[nodiscard]] MaybeAction on_epoch_end();
  [[nodiscard]] MaybeAction on_eval_begin();
  [[nodiscard]] MaybeAction on_eval_end(int64_t iterations);
  // The measurement of the window an EndWindow closed.
  [[nodiscard]] MaybeAction on_window_measured(const WindowMeasurement& window);
  // An EndWindow is waiting for its measurement.
  bool measurement_owed() const { return owed_ != Owed::kNothing; }

  bool done() const { return std::holds_alternative<profiler_state::Done>(state_); }
  const ProfilerState& state() const { return state_; }
  const std::vector<int64_t>& candidates_mw() const { return candidates_; }
  const std::vector<LimitMeasurement>& measurements() const { return measurements_; }
  // Set once done.
  std::optional<int64_t> optimal_limit_mw() const { return optimal_mw_; }
  // The warmup/profile window lengths in use (shrunk for short epochs).
  int warmup_iters() const { return warmup_; }
  int profile_iters() const { return profile_; }
  // The profile to save; eval fields are set once the eval epoch at the optimum was measured.
  PowerProfile profile(int64_t global_batch_size) const;

 private:
  enum class Owed { kNothing, kTrainWindow, kEvalWindow };

  profiler_action::SetLimit finish();
  void check_nothing_owed(const char* event) const;

  PowerLimitRange range_;
  CostModel cost_;
  ProfilerOptions options_;
  std::vector<int64_t> candidates_;
  ProfilerState state_;
  int warmup_;
  int profile_;
  int64_t steps_left_in_epoch_ = 0;
  bool eval_window_open_ = false;
  Owed owed_ = Owed::kNothing;
  int64_t eval_iterations_ = 0;
  std::vector<LimitMeasurement> measurements_;
  std::optional<int64_t> optimal_mw_;
  std::optional<double> eval_throughput_ips_;
  std::optional<double> eval_power_w_;
};

}  // namespace zeus::optimize
