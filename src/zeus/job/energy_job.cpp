// EnergyJob: its construction, the epoch protocol and the ledger; the sync points and what they
// carry out on the GPUs are in energy_job_sync.cpp.
#include "zeus/job/energy_job.h"

#include <fmt/format.h>

#include <vector>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/common/power.h"
#include "zeus/common/sync_wait.h"
#include "zeus/common/units.h"
#include "zeus/job/energy_job_impl.h"
#include "zeus/job/profile_exchange.h"
#include "zeus/optimize/early_stop.h"

namespace zeus::job {

namespace pa = optimize::profiler_action;
using contract::StopReason;
using contract::TrainResult;

EnergyJob::Impl::Impl(ResolvedJobOptions options, Collectives& collectives, RankDevice device,
                      std::unique_ptr<RankClock> clock)
    : o_(std::move(options)),
      coll_(collectives),
      ranks_(collectives.ranks()),
      device_(std::move(device)) {
  gpus_ = std::make_unique<NodeGpus>(o_, coll_, device_);
  clock_ = clock ? std::move(clock) : make_rank_clock(*gpus_);
  agree(coll_, "taking the node's power limits",
        [&] { limits_ = std::make_unique<NodeLimits>(o_, *gpus_); });
  // The master's view of the limit range (and, measuring only, of the limit the GPUs run at)
  // decides for every rank.
  std::vector<double> range(LimitRangeMessage::kSize, 0.0);
  if (ranks_.is_master()) {
    range =
        LimitRangeMessage{gpus_->range(), o_.measure_only ? gpus_->current_limit_mw() : 0}.encode();
  }
  coll_.broadcast(range, 0);
  const LimitRangeMessage limits = LimitRangeMessage::decode(range);
  range_ = limits.range;
  current_limit_mw_ = o_.measure_only ? limits.current_limit_mw : range_.max_mw;
  if (o_.service) {
    device::GpuSet* set = gpus_->gpu_set();
    take_service_trial(o_, coll_,
                       {.max_power_w = mw_to_w(range_.max_mw) * ranks_.world_size,
                        .count = ranks_.world_size,
                        .model = set != nullptr ? set->name(gpus_->owned().front()) : o_.device},
                       trial_);
  }
  // After the service's grant: the power logs are named by the batch size the job runs at.
  agree(coll_, "making the log directory",
        [&] { meter_ = std::make_unique<NodeMeter>(o_, *gpus_); });
  core_.emplace(o_, ranks_, range_);
  progress_on_ = o_.progress_bar && ranks_.is_master();
  agree(coll_, "opening the Pushgateway", [&] {
    if (ranks_.is_master() && !o_.pushgateway_url.empty()) {
      metrics_ = std::make_unique<JobMetrics>(o_.pushgateway_url, o_.job_id);
    }
  });
  agree(coll_, "opening the grid's signal", [&] { grid_ = GridLimits::make(o_, coll_); });
  if (o_.measure_only) {
    announce_profiling(o_, ranks_, nullptr, false, current_limit_mw_);
    planned_ = PlannedLimits::make_estimate(o_, coll_, *gpus_, range_, current_limit_mw_);
    return;
  }
  optimize::ProfilerOptions popts;
  popts.warmup_iters = o_.warmup_iters;
  popts.profile_iters = o_.profile_iters;
  popts.step_mw = o_.power_limit_step_mw;
  popts.selector = o_.selector;
  popts.use_optimal_limit = !o_.observer_mode;
  profiler_ = std::make_unique<optimize::PowerLimitProfiler>(range_, core_->cost(), popts);
  if (o_.per_gpu_limits && !o_.observer_mode && ranks_.world_size > 1) {
    planned_ = PlannedLimits::make(o_, coll_, *gpus_, range_);
    // Each rank's own step time needs the waits at the gradient sync told apart: counted while
    // profiling, then over the pace checks' samples only (Note [sampled pace]).
    count_waits(planned_ != nullptr);
  }
  auto saved = load_and_share_profile(o_, coll_);
  std::optional<std::string> not_ours;
  if (saved && planned_) {
    not_ours = planned_->load(*saved);
    if (not_ours && !saved->per_gpu.empty()) {
      // Another job's GPUs: their curves say nothing of these; profile them afresh.
      if (ranks_.is_master()) {
        logger().info(
            "the saved profile of global batch size {} is not of these GPUs: {}; "
            "profiling again, per GPU",
            o_.global_batch_size, *not_ours);
      }
      saved.reset();
    }
  }
  if (saved) {
    const pa::SetLimit one = profiler_->load(*saved);
    if (planned_ && !not_ours) {
      apply_limits(planned_->make_plan(0));
      count_waits(false);  // nothing to profile: the pace checks sample their steps
    } else {
      if (planned_ && ranks_.is_master()) {
        logger().warn(
            "per-GPU limits: the saved profile of global batch size {} is used with "
            "Zeus's one limit, because {}; move it away to profile per GPU",
            o_.global_batch_size, *not_ours);
      }
      if (planned_) {
        count_waits(false);
      }
      apply(one);
    }
    profile_loaded_ = true;
    follow_grid();
  }
  announce_profiling(o_, ranks_, profiler_.get(), profile_loaded_, current_limit_mw_);
}

std::optional<int> EnergyJob::Impl::next_epoch() {
  if (result_) {
    return std::nullopt;
  }
  close_open_phases();
  if (epoch_ >= 0) {
    if (grid_) {
      read_grid();
    }
    aggregate_epoch();
  }
  // The master decides; everyone obeys the broadcast.
  using Code = DecisionMessage::Code;
  std::vector<double> d(DecisionMessage::kSize, 0.0);
  if (ranks_.is_master()) {
    DecisionMessage decision =
        core_->decide(epoch_, metric_, o_.higher_is_better, profile_view(), current_limit_mw_);
    if (trial_ && epoch_ >= 0 && metric_) {
      consult_service(*trial_, *core_, epoch_ + 1, *metric_, decision);
    }
    d = decision.encode();
    push_state(&decision);
  }
  coll_.broadcast(d, 0);
  const DecisionMessage decision = DecisionMessage::decode(d);
  if (decision.metric) {
    core_->set_last_metric(*decision.metric);
  }
  if (decision.code == Code::kContinue) {
    ++epoch_;
    metric_.reset();
    return epoch_;
  }
  finish(decision.code == Code::kTargetReached ? StopReason::kTargetReached
         : decision.code == Code::kMaxEpochs   ? StopReason::kMaxEpochs
                                               : StopReason::kCostThreshold);
  if (decision.code == Code::kCostThreshold) {
    throw optimize::CostThresholdExceeded(decision.forecast, core_->total_energy_j(),
                                          core_->total_time_s(), decision.threshold);
  }
  return std::nullopt;
}

void EnergyJob::Impl::begin_train_epoch(int64_t iterations) {
  close_open_phases();
  if (epoch_ < 0) {
    throw ConfigError(
        "a train epoch began outside epochs(): iterate the train loader inside `for (int "
        "epoch : train_loader.epochs())`");
  }
  open_loop(train_, Phase::kTrain, iterations);
  if (planned_ && planned_->planned()) {
    planned_->restart_count();  // the eval steps between are not at the plan's pace
    count_waits(false);
  }
  if (profiler_) {
    apply(profiler_->on_epoch_begin(iterations));
  }
}

void EnergyJob::Impl::train_step_begin() {
  if (profiler_) {
    apply(profiler_->on_step_begin());
  }
}

void EnergyJob::Impl::train_step_end() {
  ++steps_unsettled_;
  ++train_.done;
  ++train_steps_;
  if (profiling_done()) {
    core_->count_step_after_profiling();
  }
  if (profiler_) {
    apply(profiler_->on_step_end());
  }
  if (planned_) {
    switch (planned_->step()) {
      case PaceStep::kSample:
        // Local: the device's work so far is this rank's own (on CUDA a synchronize), and the
        // waits count from here until the check.
        settle_device();
        count_waits(true);
        planned_->start_span(clock_->own_time());
        break;
      case PaceStep::kCheck:
        check_pace();
        count_waits(false);
        break;
      case PaceStep::kNone:
        break;
    }
  }
  if (grid_ && profiling_done() && grid_->step(planned_ ? 0 : current_limit_mw_)) {
    read_grid();
  }
  if (progress_on_) {
    draw_progress("train", train_);
  }
}

void EnergyJob::Impl::end_train_epoch() {
  if (phase_ != Phase::kTrain) {
    return;
  }
  if (profiler_) {
    apply(profiler_->on_epoch_end());
  }
  close_loop(train_);
}

void EnergyJob::Impl::begin_eval_epoch(int64_t iterations) {
  close_open_phases();
  if (epoch_ < 0) {
    return;  // evaluating before training: not part of the job
  }
  open_loop(eval_, Phase::kEval, iterations);
  if (profiler_) {
    apply(profiler_->on_eval_begin());
  }
}

void EnergyJob::Impl::eval_step_end() {
  if (phase_ != Phase::kEval) {
    return;
  }
  ++steps_unsettled_;
  ++eval_.done;
  if (progress_on_) {
    draw_progress("eval ", eval_);
  }
}

void EnergyJob::Impl::end_eval_epoch() {
  if (phase_ != Phase::kEval) {
    return;
  }
  if (profiler_) {
    apply(profiler_->on_eval_end(eval_.done));
  }
  close_loop(eval_);
  save_profile(/*need_eval=*/true);
}

void EnergyJob::Impl::open_loop(LoopTally& loop, Phase phase, int64_t iterations) {
  if (!meter_->epoch_log_running()) {
    meter_->start_epoch_log(epoch_);
  }
  phase_ = phase;  // the device is busy from here: the sync point's settle says so
  sync_point([&](const ClockReading& t) {
    loop.t0 = t;
    meter_->begin_window(loop.window);
  });
  loop.total = iterations;
  loop.done = 0;
}

void EnergyJob::Impl::close_loop(LoopTally& loop) {
  phase_ = Phase::kBetween;
  sync_point([&](const ClockReading& t) {
    loop.elapsed_s += to_seconds(t.monotonic - loop.t0.monotonic);
    loop.energy_j += meter_->end_window(loop.window);
  });
  loop.iterations += loop.done;
}

ProfileView EnergyJob::Impl::profile_view() const {
  ProfileView v;
  v.profiling = profiler_ != nullptr;
  v.loaded = profile_loaded_;
  if (profiler_ && profiler_->done()) {
    v.profile = profiler_->profile(o_.global_batch_size);
  }
  return v;
}

void EnergyJob::Impl::save_profile(bool need_eval) {
  if (!profiler_ || profile_loaded_ || profile_saved_ || !profiler_->done()) {
    return;
  }
  optimize::PowerProfile p = profiler_->profile(o_.global_batch_size);
  if (need_eval && !p.eval_throughput_ips) {
    return;  // the eval epoch at the optimum is measured next
  }
  if (planned_) {
    planned_->fill(p);
  }
  profile_saved_ = true;
  save_job_profile(o_, ranks_, std::move(p));
}

void EnergyJob::Impl::close_open_phases() {
  end_train_epoch();
  end_eval_epoch();
}

void EnergyJob::Impl::aggregate_epoch() {
  // Measuring only, the limit the master's GPUs ran at goes with it (someone else may change
  // it between epochs).
  EpochMessage::Part part{train_.elapsed_s, eval_.elapsed_s, train_.energy_j, eval_.energy_j,
                          o_.measure_only && ranks_.is_master() ? gpus_->current_limit_mw() : 0};
  std::vector<double> v = EpochMessage::contribution(ranks_, part);
  coll_.all_reduce_sum(v);
  const EpochMessage epoch = EpochMessage::decode(v, ranks_.world_size);
  if (o_.measure_only) {
    current_limit_mw_ = epoch.master_limit_mw;
  }
  const contract::EpochRecord& rec =
      core_->add_epoch(epoch_, train_.iterations, eval_.iterations, epoch, current_limit_mw_);
  const auto grid_amount =
      grid_ ? grid_->close_epoch(rec.train_energy_j + rec.eval_energy_j) : std::nullopt;
  train_ = {"train"};
  eval_ = {"eval"};
  meter_->stop_epoch_log();
  if (ranks_.is_master()) {
    logger().info(
        "epoch {}: train {:.2f} s, eval {:.2f} s, energy {:.1f} J{}, limit {} W{}; job so far "
        "{:.1f} J, {:.2f} s, cost {:.1f}",
        rec.epoch + 1, rec.train_time_s, rec.eval_time_s, rec.train_energy_j + rec.eval_energy_j,
        grid_amount ? fmt::format(" ({:.4g} {})", *grid_amount, grid_->unit()) : "",
        mw_to_w(rec.power_limit_mw), metric_ ? fmt::format(", metric {:.4f}", *metric_) : "",
        core_->total_energy_j(), core_->total_time_s(),
        core_->cost().cost(core_->total_energy_j(), core_->total_time_s()));
  }
}

void EnergyJob::Impl::finish(StopReason reason) {
  const std::string device =
      ranks_.is_local_master() && !gpus_->locator().empty() ? gpus_->locator() : o_.device;
  TrainResult r = core_->result(reason, profile_view(), device);
  if (planned_) {
    planned_->fill(r);
    count_waits(false);
  }
  if (grid_) {
    grid_->fill(r);
  }
  if (r.power_limits_mw.empty() && current_limit_mw_ > 0) {
    // Zeus's one limit (or, measuring only, the limit the GPUs ran at), one per GPU as a
    // per-GPU plan's: every result says each GPU's limit.
    r.power_limits_mw.assign(static_cast<size_t>(ranks_.world_size), current_limit_mw_);
  }
  result_ = r;
  meter_->stop_epoch_log();
  save_profile(/*need_eval=*/false);
  save_job_result(o_, ranks_, r);
  if (trial_) {
    trial_->end();  // the service did not end it: the job stopped itself
  }
  limits_->restore();
  push_state(nullptr);
  metrics_.reset();  // flushes the last state (at most 2 s)
}

void EnergyJob::Impl::push_state(const DecisionMessage* decision) {
  if (!metrics_) {
    return;
  }
  const auto next = decision != nullptr && decision->forecast.predicted_cost > 0
                        ? std::optional(decision->forecast.predicted_cost)
                        : std::nullopt;
  const JobState s = job_state(*core_, profiler_.get(), epoch_ + 1, current_limit_mw_,
                               range_.max_mw, next, o_.cost_threshold, decision == nullptr);
  metrics_->push(s);
}

void EnergyJob::Impl::draw_progress(std::string_view split, const LoopTally& loop) {
  progress_.step(
      epoch_, o_.max_epochs, split, loop.done, loop.total, o_.global_batch_size,
      [&] { return meter_->power_w(); },
      [&] { return phase_text(profiler_.get(), current_limit_mw_, o_.observer_mode); });
}

EnergyJob::EnergyJob(ResolvedJobOptions options, Collectives& collectives, RankDevice device,
                     std::unique_ptr<RankClock> clock)
    : impl_(std::make_unique<Impl>(std::move(options), collectives, std::move(device),
                                   std::move(clock))) {}
EnergyJob::~EnergyJob() = default;
std::optional<int> EnergyJob::next_epoch() {
  return impl_->next_epoch();
}
void EnergyJob::begin_train_epoch(int64_t iterations) {
  impl_->begin_train_epoch(iterations);
}
void EnergyJob::train_step_begin() {
  impl_->train_step_begin();
}
void EnergyJob::train_step_end() {
  impl_->train_step_end();
}
void EnergyJob::end_train_epoch() {
  impl_->end_train_epoch();
}
void EnergyJob::begin_eval_epoch(int64_t iterations) {
  impl_->begin_eval_epoch(iterations);
}
void EnergyJob::eval_step_end() {
  impl_->eval_step_end();
}
void EnergyJob::end_eval_epoch() {
  impl_->end_eval_epoch();
}
void EnergyJob::report_metric(double metric) {
  impl_->report_metric(metric);
}
void EnergyJob::report_metric(double metric, bool higher_is_better) {
  impl_->set_higher_is_better(higher_is_better);
  impl_->report_metric(metric);
}
const ResolvedJobOptions& EnergyJob::options() const {
  return impl_->options();
}
RankInfo EnergyJob::ranks() const {
  return impl_->ranks();
}
bool EnergyJob::profiling_done() const {
  return impl_->profiling_done();
}
std::optional<int64_t> EnergyJob::optimal_power_limit_mw() const {
  return impl_->optimal_power_limit_mw();
}
int64_t EnergyJob::current_power_limit_mw() const {
  return impl_->current_power_limit_mw();
}
const std::optional<TrainResult>& EnergyJob::result() const {
  return impl_->result();
}

}  // namespace zeus::job
