#include "zeus/job/planned_limits.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>

#include "zeus/common/logging.h"
#include "zeus/common/posix.h"
#include "zeus/common/units.h"
#include "zeus/device/sim/sim_gpu_set.h"
#include "zeus/job/profile_exchange.h"

namespace zeus::job {

namespace {

std::vector<double> watts(const std::vector<int64_t>& limits_mw) {
  std::vector<double> out;
  for (int64_t mw : limits_mw) {
    out.push_back(mw_to_w(mw));
  }
  return out;
}

}  // namespace

// [idle_w x W, 1 x W]: each GPU's idle power at its rank, and which ranks have a GPU of their
// own (a shared GPU cannot take two limits). Idle power is the simulator's model, or a real GPU's
// reading now, before training: what it draws while it waits at the sync. Read only by jobs that
// plan per GPU.
namespace {

// Each rank's GPU as "uuid" and "host", gathered on every rank: the local masters write their
// ranks' strings at the ranks' places (write_text), one all-reduce sums them.
std::vector<std::pair<std::string, std::string>> gather_gpu_ids(Collectives& collectives,
                                                                NodeGpus& gpus) {
  const RankInfo ranks = collectives.ranks();
  const auto w = static_cast<size_t>(ranks.world_size);
  std::vector<double> text(w * kTextSlot, 0.0);
  if (gpus.ranks().is_local_master() && gpus.owns_gpus()) {
    const std::string host = host_name();
    for (size_t k = 0; k < gpus.owned_ranks().size(); ++k) {
      const int r = gpus.owned_ranks()[k];
      if (r < 0 || static_cast<size_t>(r) >= w) {
        continue;
      }
      const int g = gpus.owned()[k];
      write_text(
          text, static_cast<size_t>(r),
          (gpus.simulated() ? gpus.sim_gpus()->uuid(g) : gpus.gpu_set()->uuid(g)) + '\n' + host);
    }
  }
  collectives.all_reduce_sum(text);
  std::vector<std::pair<std::string, std::string>> ids(w);
  for (size_t r = 0; r < w; ++r) {
    const std::string id = read_text(text, r);
    const auto nl = id.find('\n');
    ids[r] = nl == std::string::npos ? std::pair(id, std::string())
                                     : std::pair(id.substr(0, nl), id.substr(nl + 1));
  }
  return ids;
}

}  // namespace

std::unique_ptr<PlannedLimits> PlannedLimits::make(const ResolvedJobOptions& options,
                                                   Collectives& collectives, NodeGpus& gpus,
                                                   PowerLimitRange range) {
  const RankInfo ranks = collectives.ranks();
  const auto w = static_cast<size_t>(ranks.world_size);
  std::vector<double> slots(2 * w, 0.0);
  if (gpus.ranks().is_local_master() && gpus.owns_gpus()) {
    for (size_t k = 0; k < gpus.owned_ranks().size(); ++k) {
      const int r = gpus.owned_ranks()[k];
      if (r >= 0 && static_cast<size_t>(r) < w) {
        const int g = gpus.owned()[k];
        slots[static_cast<size_t>(r)] = gpus.simulated() ? gpus.sim_gpus()->idle_power_w(g)
                                                         : mw_to_w(gpus.gpu_set()->power_mw(g));
        slots[w + static_cast<size_t>(r)] = 1;
      }
    }
  }
  collectives.all_reduce_sum(slots);
  std::vector<int> without;
  for (size_t r = 0; r < w; ++r) {
    if (slots[w + r] != 1) {
      without.push_back(static_cast<int>(r));
    }
  }
  if (!without.empty()) {
    if (ranks.is_master()) {
      logger().warn(
          "per-GPU power limits need one GPU per rank, and rank(s) {} have none of their own; "
          "the job plans one limit for all (Zeus's)",
          fmt::join(without, ","));
    }
    return nullptr;
  }
  std::vector<double> idle(slots.begin(), slots.begin() + static_cast<std::ptrdiff_t>(w));
  auto planned = std::unique_ptr<PlannedLimits>(
      new PlannedLimits(collectives, std::move(idle), range, options));
  planned->gpu_ids_ = gather_gpu_ids(collectives, gpus);
  return planned;
}

PlannedLimits::PlannedLimits(Collectives& collectives, std::vector<double> idle_w,
                             PowerLimitRange range, const ResolvedJobOptions& options)
    : coll_(collectives),
      ranks_(collectives.ranks()),
      plan_(std::move(idle_w),
            std::vector<int64_t>(static_cast<size_t>(ranks_.world_size), range.max_mw),
            {.eta = options.eta, .selector = options.selector}),
      follow_pace_(options.follow_gpu_pace) {}

std::unique_ptr<PlannedLimits> PlannedLimits::make_estimate(const ResolvedJobOptions& options,
                                                            Collectives& collectives,
                                                            NodeGpus& gpus, PowerLimitRange range,
                                                            int64_t limit_mw) {
  if (!options.per_gpu_limits || collectives.ranks().world_size <= 1) {
    return nullptr;
  }
  auto planned = make(options, collectives, gpus, range);
  const auto saved = planned ? load_and_share_profile(options, collectives) : std::nullopt;
  if (!saved || !planned->estimate_only(*saved, limit_mw)) {
    return nullptr;  // no curves of this job: nothing to say what a plan would save
  }
  return planned;
}

void PlannedLimits::add_window(int64_t limit_mw, int64_t iterations, const WindowMessage& window) {
  plan_.add_window(limit_mw, iterations, window.max_elapsed_s, window.own_s,
                   window.rank_gpu_energy_j);
}

std::optional<std::string> PlannedLimits::load(const optimize::PowerProfile& saved) {
  std::vector<optimize::CurveOwner> owners;
  for (const auto& [uuid, host] : gpu_ids_) {
    owners.push_back({uuid, host});
  }
  optimize::CurvesMatch match = optimize::match_curves(saved.per_gpu, owners);
  if (!match.curves) {
    return match.why_not;
  }
  plan_.load(std::move(*match.curves));
  return std::nullopt;
}

const std::vector<int64_t>& PlannedLimits::make_plan(int epoch) {
  const optimize::PlanOutcome& p = plan_.plan();
  planned_ = true;
  first_plan_mw_ = p.limits_mw;
  if (ranks_.is_master()) {
    const auto& one = plan_.single();
    logger().info(
        "epoch {}: per-GPU power limits [{}] W (by rank){}", epoch + 1,
        fmt::join(watts(p.limits_mw), ", "),
        one ? fmt::format("; Zeus's one limit would be {} W: the plan saves {:.1f}% energy and "
                          "{:.1f}% time per step by the profile",
                          mw_to_w(one->limits_mw.front()), 100 * (1 - p.energy_j / one->energy_j),
                          100 * (1 - p.time_s / one->time_s))
            : std::string("; these GPUs share no limit for Zeus's one"));
  }
  return plan_.limits_mw();
}

bool PlannedLimits::estimate_only(const optimize::PowerProfile& saved, int64_t limit_mw) {
  if (load(saved)) {
    return false;  // not this job's curves
  }
  const auto& curves = plan_.curves();
  for (const auto& c : curves) {
    if (std::none_of(c.points.begin(), c.points.end(),
                     [&](const auto& p) { return p.limit_mw == limit_mw; })) {
      return false;
    }
  }
  const std::vector<int64_t> all(curves.size(), limit_mw);
  baseline_ = optimize::evaluate_plan(curves, all, optimize::CostModel(0.5, 1.0));
  first_plan_mw_ = plan_.plan().limits_mw;
  planned_ = true;
  follow_pace_ = false;  // nothing is set, so nothing follows
  if (ranks_.is_master()) {
    logger().info(
        "measure-only: from the saved per-GPU curves, limits [{}] W would spend {:.1f}% less "
        "energy per step than every GPU at {} W; none is set",
        fmt::join(watts(plan_.limits_mw()), ", "),
        100 * (1 - plan_.outcome().energy_j / baseline_->energy_j), mw_to_w(limit_mw));
  }
  return true;
}

void PlannedLimits::start_span(std::chrono::nanoseconds own_now) {
  span_from_ = own_now;
  span_steps_ = 0;
  sampling_ = true;
}

void PlannedLimits::restart_count() {
  since_check_ = 0;
  span_steps_ = 0;
  sampling_ = false;
}

PaceStep PlannedLimits::step() {
  if (!planned_) {
    return PaceStep::kNone;
  }
  ++steps_;
  ++span_steps_;
  ++since_check_;
  // The plan's own estimate per step: what one limit would have cost these GPUs at their pace
  // (measuring only: the limit they run at).
  const std::optional<optimize::PlanOutcome>& against = baseline_ ? baseline_ : plan_.single();
  if (against) {
    saving_j_ += against->energy_j - plan_.outcome().energy_j;
    saving_s_ += against->time_s - plan_.outcome().time_s;
  }
  if (!follow_pace_) {
    return PaceStep::kNone;
  }
  if (since_check_ == kDriftCheckSteps - kPaceSampleSteps) {
    return PaceStep::kSample;
  }
  if (since_check_ >= kDriftCheckSteps && sampling_) {
    return PaceStep::kCheck;
  }
  return PaceStep::kNone;
}

std::optional<std::vector<int64_t>> PlannedLimits::check(std::chrono::nanoseconds own_now,
                                                         int epoch) {
  std::vector<double> own = per_rank_slots(ranks_);
  own[static_cast<size_t>(ranks_.rank)] = to_seconds(own_now - span_from_);
  coll_.all_reduce_sum(own);
  const int64_t steps = span_steps_;
  restart_count();
  const std::vector<int64_t> before = plan_.limits_mw();
  const auto reason = plan_.observe(steps, own);
  if (!reason) {
    return std::nullopt;
  }
  replans_.push_back({epoch, steps_, *reason, plan_.limits_mw()});
  if (ranks_.is_master()) {
    logger().info("epoch {}, step {}: {}; per-GPU limits [{}] W (were [{}] W), not profiled again",
                  epoch + 1, steps_, *reason, fmt::join(watts(plan_.limits_mw()), ", "),
                  fmt::join(watts(before), ", "));
  }
  if (plan_.limits_mw() == before) {
    return std::nullopt;
  }
  return plan_.limits_mw();
}

std::optional<std::vector<int64_t>> PlannedLimits::follow_knob(double eta, int epoch) {
  const std::vector<int64_t> before = plan_.limits_mw();
  plan_.set_eta(eta);
  plan_.plan();
  if (plan_.limits_mw() == before) {
    return std::nullopt;
  }
  replans_.push_back({epoch, steps_,
                      fmt::format("the grid's signal moved Zeus's knob to {:.3f}", eta),
                      plan_.limits_mw()});
  if (ranks_.is_master()) {
    logger().info(
        "epoch {}, step {}: the grid's signal moved Zeus's knob to {:.3f}; per-GPU "
        "limits [{}] W (were [{}] W)",
        epoch + 1, steps_, eta, fmt::join(watts(plan_.limits_mw()), ", "),
        fmt::join(watts(before), ", "));
  }
  return plan_.limits_mw();
}

void PlannedLimits::fill(contract::TrainResult& result) const {
  if (!planned_) {
    return;
  }
  result.power_limit_plan = baseline_ ? "measure_only" : "per_gpu";
  result.power_limits_mw = plan_.limits_mw();
  result.estimated_plan_energy_saving_j = saving_j_;
  result.estimated_plan_time_saving_s = saving_s_;
  result.replans = replans_;
}

void PlannedLimits::fill(optimize::PowerProfile& profile) const {
  if (!planned_) {
    return;
  }
  profile.per_gpu = plan_.curves();
  for (size_t r = 0; r < profile.per_gpu.size() && r < gpu_ids_.size(); ++r) {
    profile.per_gpu[r].uuid = gpu_ids_[r].first;
    profile.per_gpu[r].host = gpu_ids_[r].second;
  }
  profile.optimal_per_gpu_mw = first_plan_mw_;
}

}  // namespace zeus::job
