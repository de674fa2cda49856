#include "zeus/optimize/bso_server_rules.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <limits>
#include <map>

#include "zeus/common/random.h"
#include "zeus/optimize/pruning.h"

namespace zeus::optimize::bso {
namespace {

[[noreturn]] void invalid(const std::string& field, const std::string& rule) {
  throw BsoError(422, fmt::format("{}: {}", field, rule), field);
}

const Trial* find_trial(const Job& job, int64_t trial_number) {
  const auto it = std::find_if(job.trials.begin(), job.trials.end(),
                               [&](const Trial& t) { return t.trial_number == trial_number; });
  return it == job.trials.end() ? nullptr : &*it;
}

double trial_cost(const JobParams& params, const Trial& t) {
  return zeus_cost(params, t.energy_j.value_or(0.0), t.time_s.value_or(0.0));
}

bool lean(const JobParams& params) {
  return params.policy.policy == BsoPolicy::kLean;
}

// The cost a bandit reward is made of. Lean: a trial that did not converge is no cheaper than
// beta x min_cost (it was stopped early, not cheap); upstream counts its cost as it is.
double reward_cost(const Job& job, double cost, bool converged) {
  if (lean(job.params) && !converged && job.min_cost && job.params.beta_knob) {
    return std::max(cost, *job.params.beta_knob * *job.min_cost);
  }
  return cost;
}

}  // namespace

void validate(JobParams& p) {
  if (p.job_id_prefix.empty()) {
    invalid("job_id_prefix", "must not be empty");
  }
  if (!p.job_id.empty() && !p.job_id.starts_with(p.job_id_prefix)) {
    invalid("job_id",
            fmt::format("'{}' must start with job_id_prefix '{}'", p.job_id, p.job_id_prefix));
  }
  if (p.batch_sizes.empty()) {
    invalid("batch_sizes", "must not be empty");
  }
  std::sort(p.batch_sizes.begin(), p.batch_sizes.end());
  if (std::adjacent_find(p.batch_sizes.begin(), p.batch_sizes.end()) != p.batch_sizes.end()) {
    invalid("batch_sizes", "must not repeat a batch size");
  }
  if (p.batch_sizes.front() <= 0) {
    invalid("batch_sizes", "must be positive");
  }
  if (p.default_batch_size <= 0 ||
      !std::binary_search(p.batch_sizes.begin(), p.batch_sizes.end(), p.default_batch_size)) {
    invalid("default_batch_size",
            fmt::format("{} must be positive and one of batch_sizes {}", p.default_batch_size,
                        fmt::join(p.batch_sizes, ", ")));
  }
  if (!(p.eta_knob >= 0.0 && p.eta_knob <= 1.0)) {
    invalid("eta_knob", fmt::format("{} must be in [0, 1]", p.eta_knob));
  }
  if (p.beta_knob && !(*p.beta_knob > 0.0)) {
    invalid("beta_knob",
            fmt::format("{} must be positive, or null to disable early stop", *p.beta_knob));
  }
  if (p.max_epochs <= 0) {
    invalid("max_epochs", fmt::format("{} must be positive", p.max_epochs));
  }
  if (p.num_pruning_rounds < 0) {
    invalid("num_pruning_rounds", "must not be negative");
  }
  if (p.window_size < 0) {
    invalid("window_size", "must not be negative (0: every observation)");
  }
  if (p.mab_num_explorations < 0) {
    invalid("mab_num_explorations", "must not be negative");
  }
  if (!(p.max_power_w > 0)) {
    invalid("max_power", "must be positive");
  }
  if (p.number_of_gpus <= 0) {
    invalid("number_of_gpus", "must be positive");
  }
  if (p.gpu_model.empty()) {
    invalid("gpu_model", "must not be empty");
  }
}

double zeus_cost(const JobParams& params, double energy_j, double time_s) {
  return params.eta_knob * energy_j + (1.0 - params.eta_knob) * params.max_power_w * time_s;
}

ReportDecision decide_report(const Job& job, const Report& report) {
  const Trial* trial = find_trial(job, report.trial_number);
  if (trial == nullptr) {
    throw BsoError(400, fmt::format("trial {} of job '{}' does not exist", report.trial_number,
                                    job.params.job_id));
  }
  if (trial->batch_size != report.batch_size) {
    throw BsoError(
        400, fmt::format("trial {} of job '{}' runs batch size {}, not {}", report.trial_number,
                         job.params.job_id, trial->batch_size, report.batch_size));
  }
  ReportDecision d;
  if (trial->status != TrialStatus::kDispatched) {
    d.stop_train = true;
    d.converged = trial->converged.value_or(false);
    d.message = fmt::format("Result for this trial({}) is already reported.", trial->trial_number);
    return d;
  }
  const JobParams& p = job.params;
  const double cost = zeus_cost(p, report.energy_j, report.time_s);
  const double bound = p.beta_knob && job.min_cost ? *p.beta_knob * *job.min_cost
                                                   : std::numeric_limits<double>::infinity();
  const bool within = bound >= cost;
  const bool reached = p.higher_is_better_metric ? report.metric >= p.target_metric
                                                 : report.metric <= p.target_metric;
  const bool capped = trial->epoch_cap && report.current_epoch >= *trial->epoch_cap;
  if (within && report.current_epoch < p.max_epochs && !reached && !capped) {
    d.message = "Stop condition not met, keep training";
    return d;
  }
  d.stop_train = true;
  d.converged = reached && within;
  Trial done = *trial;
  done.status = TrialStatus::kSucceeded;
  done.converged = d.converged;
  done.time_s = report.time_s;
  done.energy_j = report.energy_j;
  done.epochs = report.current_epoch;
  d.finished = done;
  if (!job.min_cost || cost < *job.min_cost) {
    d.new_min_cost = cost;
    d.new_min_cost_batch_size = trial->batch_size;
  }
  if (job.stage == Stage::kMab && job.arms.contains(trial->batch_size) &&
      trial->type == TrialType::kMab) {
    d.refit_arm =
        fit_arm(p, arm_rewards(job, trial->batch_size, reward_cost(job, cost, d.converged)));
  }
  if (d.converged) {
    d.message = "Train succeeded";
  } else if (!within) {
    d.message = fmt::format(
        "Batch Size({}) exceeded the cost upper bound: current cost({}) > "
        "beta_knob({})*min_cost({})",
        report.batch_size, cost, *p.beta_knob, *job.min_cost);
  } else if (capped && report.current_epoch < p.max_epochs) {
    d.message =
        fmt::format("Train failed to converge within lean's epoch cap({}) for this batch size",
                    *trial->epoch_cap);
  } else {
    d.message = fmt::format("Train failed to converge within max_epoch({})", p.max_epochs);
  }
  return d;
}

std::variant<NewTrial, StartMab> next_pruning_step(const Job& job) {
  const JobParams& p = job.params;
  std::map<int64_t, std::vector<PruningTry>> tries;  // non-Failed explorations, in trial order
  for (const Trial& t : job.trials) {
    if (t.type == TrialType::kExploration && t.status != TrialStatus::kFailed) {
      tries[t.batch_size].push_back({.pending = t.status == TrialStatus::kDispatched,
                                     .reached = t.converged.value_or(false),
                                     .cost = trial_cost(p, t),
                                     .epochs = t.epochs.value_or(0)});
    }
  }
  const PruningStep step =
      next_pruning_step(PruningRules{.batch_sizes = p.batch_sizes,
                                     .default_batch_size = p.default_batch_size,
                                     .rounds = p.num_pruning_rounds,
                                     .policy = p.policy.policy,
                                     .lean = p.policy.lean,
                                     .ties = PruningRules::Ties::kSmallest},
                        tries);
  if (const auto* next = std::get_if<PruningNext>(&step)) {
    return NewTrial{TrialType::kExploration, next->batch_size, next->epoch_cap};
  }
  if (const auto* waiting = std::get_if<PruningWaiting>(&step)) {
    // While an exploration is out, others run where it is cheapest so far.
    return NewTrial{TrialType::kConcurrent, job.min_cost_batch_size.value_or(waiting->round_start),
                    std::nullopt};
  }
  if (std::holds_alternative<PruningStuck>(step)) {
    throw BsoError(500,
                   "No converged batch sizes has observed. Reconfigure batch_sizes and retry "
                   "again.");
  }
  return StartMab{std::get<PruningDone>(step).arms};
}

ArmState fit_arm(const JobParams& params, const std::vector<double>& rewards) {
  return fit_gaussian_arm(params.mab_prior_mean, params.mab_prior_precision, rewards);
}

std::vector<double> arm_rewards(const Job& job, int64_t batch_size,
                                std::optional<double> extra_cost) {
  std::vector<double> rewards;
  for (const Trial& t : job.trials) {
    if (t.batch_size == batch_size && t.type == TrialType::kMab &&
        t.status == TrialStatus::kSucceeded) {
      rewards.push_back(-reward_cost(job, trial_cost(job.params, t), t.converged.value_or(false)));
    }
  }
  if (extra_cost) {
    rewards.push_back(-*extra_cost);
  }
  const auto window = static_cast<size_t>(job.params.window_size);
  if (window > 0 && rewards.size() > window) {
    rewards.erase(rewards.begin(), rewards.end() - static_cast<std::ptrdiff_t>(window));
  }
  return rewards;
}

int64_t predict_mab(const Job& job, std::mt19937_64& rng) {
  if (job.arms.empty()) {
    throw BsoError(500,
                   fmt::format("job '{}' is in the MAB stage with no arms", job.params.job_id));
  }
  std::vector<int64_t> order;
  for (const auto& [bs, arm] : job.arms) {
    order.push_back(bs);
  }
  zeus::shuffle(order.begin(), order.end(), rng);
  for (const int64_t bs : order) {
    if (job.arms.at(bs).num_observations < job.params.mab_num_explorations) {
      return bs;
    }
  }
  int64_t best = job.arms.begin()->first;
  double best_draw = -std::numeric_limits<double>::infinity();
  // Lean's narrower posterior (its spread; 0: Zeus's).
  const double spread = lean(job.params) ? job.params.policy.lean.spread : 0.0;
  for (const auto& [bs, arm] : job.arms) {
    const double draw = draw_gaussian_arm(arm, spread, rng);
    if (draw > best_draw) {
      best_draw = draw;
      best = bs;
    }
  }
  return best;
}

}  // namespace zeus::optimize::bso
