// EnergyJob's sync points and what they carry out on the node's GPUs: the profiler's actions,
// the per-GPU plans' limits, the grid's choices.
#include <algorithm>
#include <variant>

#include "zeus/common/logging.h"
#include "zeus/common/power.h"
#include "zeus/common/sync_wait.h"
#include "zeus/common/units.h"
#include "zeus/job/energy_job_impl.h"

namespace zeus::job {

namespace pa = optimize::profiler_action;

namespace {

int64_t unix_ns(const ClockReading& t) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(t.wall.time_since_epoch()).count();
}

}  // namespace

void EnergyJob::Impl::apply(const optimize::MaybeAction& action) {
  if (action) {
    std::visit([&](const auto& a) { apply(a); }, *action);
  }
}

void EnergyJob::Impl::apply(const pa::SetLimit& set) {
  // No rank steps on before its node's local master has applied the limit, and the master
  // applies it only after every rank's steps so far were accounted at the old one (a
  // simulated GPU's settle). Every rank's profiler sets limits at the same steps, so the
  // barriers match.
  current_limit_mw_ = set.limit_mw;
  sync_point([&](const ClockReading&) { limits_->set_power_limit_mw(set.limit_mw); });
}

void EnergyJob::Impl::apply_limits(const std::vector<int64_t>& limits_mw) {
  current_limit_mw_ = *std::max_element(limits_mw.begin(), limits_mw.end());
  sync_point([&](const ClockReading&) { limits_->set_power_limits_mw(limits_mw); });
  planned_->restart_count();  // the next pace check samples steps at these limits
}

void EnergyJob::Impl::apply(const pa::BeginWindow&) {
  sync_point([&](const ClockReading& t) {
    window_begin_ = t;
    window_own_begin_ = own_at_align_;
    meter_->begin_window("profile");
  });
}

void EnergyJob::Impl::apply(const pa::EndWindow&) {
  const bool train_window = !profiler_->done();  // not the eval one at the optimum
  const ClockReading end = align();
  std::vector<double> v = WindowMessage::contribution(
      ranks_, WindowMessage::gather(to_seconds(end.monotonic - window_begin_.monotonic),
                                    to_seconds(own_at_align_ - window_own_begin_),
                                    meter_->end_window_per_gpu("profile"), gpus_->owned_ranks()));
  coll_.all_reduce_sum(v);  // also keeps every rank out of its next step until all have read
  const WindowMessage window = WindowMessage::decode(v, ranks_.world_size);
  if (train_window) {
    core_->add_window({epoch_, current_limit_mw_, unix_ns(window_begin_), unix_ns(end)});
  }
  if (ranks_.is_master()) {
    logger().debug("window at {} W: {:.3f} s, {:.1f} J", mw_to_w(current_limit_mw_),
                   window.max_elapsed_s, window.energy_j);
  }
  if (planned_ && train_window) {
    planned_->add_window(current_limit_mw_, profiler_->profile_iters(), window);
  }
  const optimize::MaybeAction next = profiler_->on_window_measured(
      {std::chrono::duration<double>(window.max_elapsed_s), window.energy_j});
  if (train_window && profiler_->done()) {
    follow_grid();
  }
  if (planned_ && train_window && profiler_->done()) {
    apply_limits(planned_->make_plan(epoch_));  // instead of Zeus's one limit
    count_waits(false);  // profiled: from now on only the pace checks' samples count waits
    return;
  }
  apply(next);
}

void EnergyJob::Impl::count_waits(bool on) {
  if (on && !counting_waits_) {
    waits_at_arm_ = sync_wait::total();
    steps_at_arm_ = train_steps_;
  } else if (!on && counting_waits_ && !said_wall_time_ && !clock_->device_clock() &&
             train_steps_ > steps_at_arm_ && sync_wait::total() == waits_at_arm_ &&
             ranks_.is_master()) {
    said_wall_time_ = true;
    logger().warn(
        "per-GPU limits: no zeus::distributed::GradientSync counted a wait at the gradient sync "
        "over {} train step(s), so each rank's own step time is its wall time, waits included "
        "(the program averages gradients another way: its own all-reduce, or DDP); the plan "
        "then sees every GPU as slow as the slowest and leans to one limit. Average with "
        "GradientSync, or set ZEUS_POWER_LIMIT_PLAN=global",
        train_steps_ - steps_at_arm_);
  }
  counting_waits_ = on;
  sync_wait::arm(on);
}

void EnergyJob::Impl::check_pace() {
  sync_point([](const ClockReading&) {});
  if (auto limits = planned_->check(own_at_align_, epoch_)) {
    apply_limits(*limits);
  }
}

void EnergyJob::Impl::follow_grid() {
  if (grid_ && !o_.observer_mode && !grid_->following()) {
    grid_->follow(profiler_->measurements(), o_.eta, core_->cost().max_power_w());
  }
}

void EnergyJob::Impl::read_grid() {
  std::chrono::nanoseconds now{0};
  sync_point([&](const ClockReading& t) { now = t.monotonic; });
  const auto change = grid_->read(now, epoch_);
  if (!change) {
    return;
  }
  if (planned_ && planned_->planned()) {
    if (auto limits = planned_->follow_knob(change->eta, epoch_)) {
      apply_limits(*limits);
    }
  } else if (change->changed) {
    apply(pa::SetLimit{change->limit_mw});
  }
}

void EnergyJob::Impl::settle_device() {
  if (device_.synchronize) {
    device_.synchronize();
  }
  clock_->settle(steps_unsettled_, phase_ != Phase::kBetween);
  steps_unsettled_ = 0;
}

void EnergyJob::Impl::sync_point(const std::function<void(const ClockReading&)>& read) {
  read(align());
  barrier(coll_);
}

ClockReading EnergyJob::Impl::align() {
  settle_device();
  own_at_align_ = clock_->own_time();
  return join_clocks(*clock_, coll_);
}

}  // namespace zeus::job
