#include "zeus/job/job_core.h"

#include <algorithm>

#include "zeus/common/errors.h"
#include "zeus/common/units.h"
#include "zeus/optimize/early_stop.h"

namespace zeus::job {

using contract::EpochRecord;
using contract::StopReason;
using contract::TrainResult;

JobCore::JobCore(const ResolvedJobOptions& options, const RankInfo& ranks, PowerLimitRange range)
    : o_(options),
      ranks_(ranks),
      range_(range),
      cost_(options.eta, mw_to_w(range.max_mw) * ranks.world_size) {}

const EpochRecord& JobCore::add_epoch(int epoch, int64_t train_iterations, int64_t eval_iterations,
                                      const EpochMessage& agreed, int64_t limit_mw) {
  EpochRecord rec;
  rec.epoch = epoch;
  rec.train_iterations = train_iterations;
  rec.eval_iterations = eval_iterations;
  rec.train_time_s = agreed.train_time_s;
  rec.eval_time_s = agreed.eval_time_s;
  rec.train_energy_j = agreed.train_energy_j;
  rec.eval_energy_j = agreed.eval_energy_j;
  rec.power_limit_mw = limit_mw;
  total_time_s_ += rec.train_time_s + rec.eval_time_s;
  total_energy_j_ += rec.train_energy_j + rec.eval_energy_j;
  records_.push_back(rec);
  return records_.back();
}

void JobCore::set_last_metric(double metric) {
  if (!records_.empty()) {
    records_.back().metric = metric;
  }
}

DecisionMessage JobCore::decide(int epoch, std::optional<double> metric, bool higher_is_better,
                                const ProfileView& profile, int64_t current_limit_mw) const {
  using Code = DecisionMessage::Code;
  DecisionMessage decision;
  decision.metric = metric;
  const bool reached =
      metric && (higher_is_better ? *metric >= o_.target_metric : *metric <= o_.target_metric);
  if (reached) {
    decision.code = Code::kTargetReached;
  } else if (epoch + 1 >= o_.max_epochs) {
    decision.code = Code::kMaxEpochs;
  } else if (epoch >= 0 && !records_.empty() && (!profile.profiling || profile.profile)) {
    decision.forecast =
        optimize::forecast_next_epoch(cost_, forecast_inputs(profile, current_limit_mw));
    if (optimize::reaches_threshold(decision.forecast, o_.cost_threshold)) {
      decision.code = Code::kCostThreshold;
      decision.threshold = o_.cost_threshold;
    }
  }
  return decision;
}

optimize::EpochForecastInputs JobCore::forecast_inputs(const ProfileView& profile,
                                                       int64_t current_limit_mw) const {
  ZEUS_ASSERT(!records_.empty(), "a forecast before the first epoch");
  optimize::EpochForecastInputs in;
  const EpochRecord& last = records_.back();
  in.energy_so_far_j = total_energy_j_;
  in.time_so_far_s = total_time_s_;
  in.train_iters_per_epoch = last.train_iterations;
  in.eval_iters_per_epoch = last.eval_iterations;
  if (!profile.profile) {
    const auto rate = [](int64_t iters, double s) { return s > 0 ? iters / s : 0.0; };
    const auto power = [](double j, double s) { return s > 0 ? j / s : 0.0; };
    in.train_throughput_ips = rate(last.train_iterations, last.train_time_s);
    in.train_power_w = power(last.train_energy_j, last.train_time_s);
    in.eval_throughput_ips = rate(last.eval_iterations, last.eval_time_s);
    in.eval_power_w = power(last.eval_energy_j, last.eval_time_s);
    return in;
  }
  const optimize::PowerProfile& p = *profile.profile;
  const auto it = p.train.find(current_limit_mw);
  const optimize::LimitMeasurement m =
      it != p.train.end() ? it->second : p.train.at(p.optimal_power_limit_mw);
  in.train_throughput_ips = m.throughput_ips;
  in.train_power_w = m.power_w;
  in.eval_throughput_ips = p.eval_throughput_ips.value_or(m.throughput_ips);
  in.eval_power_w = p.eval_power_w.value_or(m.power_w);
  return in;
}

TrainResult JobCore::result(StopReason reason, const ProfileView& profile,
                            const std::string& device) const {
  TrainResult r;
  r.energy_j = total_energy_j_;
  r.time_s = total_time_s_;
  r.cost = cost_.cost(total_energy_j_, total_time_s_);
  r.num_epochs = static_cast<int>(records_.size());
  r.reached = reason == StopReason::kTargetReached;
  r.job_id = o_.job_id;
  r.global_batch_size = o_.global_batch_size;
  r.world_size = ranks_.world_size;
  r.nodes = ranks_.world_size / std::max(1, ranks_.local_world_size);
  r.device = device;
  r.eta = o_.eta;
  r.max_power_w = cost_.max_power_w();
  r.cost_threshold = o_.cost_threshold;
  r.target_metric = o_.target_metric;
  r.stop_reason = reason;
  r.observer_mode = o_.observer_mode;
  r.measure_only = o_.measure_only;
  r.profiled = profile.profiling && !profile.loaded;
  r.max_power_limit_mw = range_.max_mw;
  r.epochs = records_;
  r.windows = windows_;
  if (profile.profile) {
    const optimize::PowerProfile& p = *profile.profile;
    r.optimal_power_limit_mw = p.optimal_power_limit_mw;
    const auto at_max = p.train.find(range_.max_mw);
    const auto at_opt = p.train.find(p.optimal_power_limit_mw);
    if (at_max != p.train.end() && at_opt != p.train.end()) {
      const auto n = static_cast<double>(iters_after_profiling_);
      const auto& mx = at_max->second;
      const auto& op = at_opt->second;
      r.estimated_energy_saving_j =
          n * (mx.power_w / mx.throughput_ips - op.power_w / op.throughput_ips);
      r.estimated_time_saving_s = n * (1.0 / mx.throughput_ips - 1.0 / op.throughput_ips);
    }
  }
  return r;
}

}  // namespace zeus::job
