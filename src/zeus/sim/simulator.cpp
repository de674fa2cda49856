#include "zeus/sim/simulator.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/common/power.h"
#include "zeus/common/random.h"
#include "zeus/optimize/batch_size_optimizer.h"
#include "zeus/optimize/cost.h"
#include "zeus/optimize/power_limit_profiler.h"

namespace zeus::sim {

std::string_view to_string(Fidelity fidelity) {
  return fidelity == Fidelity::kWindows ? "windows" : "zeus";
}

Fidelity parse_fidelity(std::string_view text) {
  if (iequals(text, "zeus")) {
    return Fidelity::kZeus;
  }
  if (iequals(text, "windows")) {
    return Fidelity::kWindows;
  }
  throw ConfigError(fmt::format(
      "--fidelity '{}': choose zeus (the paper's accounting: a profiled epoch at the mean over "
      "limits) or windows (the profiler's warmup and profiling windows, limit by limit)",
      text));
}

std::map<int64_t, int64_t> jit_power_limits_w(const WorkloadModel& model, double eta,
                                              const optimize::SelectorOptions& selector) {
  std::map<int64_t, int64_t> out;
  for (const int64_t bs : model.batch_sizes()) {
    const optimize::CostModel cost(eta, static_cast<double>(model.max_power_limit_w(bs)));
    std::vector<optimize::LimitMeasurement> measured;
    for (const int64_t pl : model.power_limits_w(bs)) {
      const double t = model.epoch_time_s(bs, pl);
      measured.push_back(
          {w_to_mw(static_cast<double>(pl)), 1.0 / t, model.epoch_energy_j(bs, pl) / t});
    }
    out[bs] = whole_w(optimize::select_power_limit(measured, cost, selector));  // the trace's W
  }
  return out;
}

namespace {

// Mean epochs to the target over the runs, a run that never reaches counting as max_epochs;
// nullopt with `require_all` when some run never reaches within max_epochs.
std::optional<double> mean_epochs(const std::vector<std::optional<int64_t>>& runs,
                                  int64_t max_epochs, bool require_all) {
  double sum = 0;
  for (const auto& e : runs) {
    if (!e || *e > max_epochs) {
      if (require_all) {
        return std::nullopt;
      }
      sum += static_cast<double>(max_epochs);
    } else {
      sum += static_cast<double>(std::max<int64_t>(*e, 1));
    }
  }
  return sum / static_cast<double>(runs.size());
}

struct EpochCost {
  double energy_j = 0;
  double time_s = 0;
};

// A batch size's epochs at its chosen limit, preceded (on its first try) by the profiled ones.
struct EpochPlan {
  std::vector<EpochCost> profiled;
  EpochCost steady;

  EpochCost epoch(size_t index) const { return index < profiled.size() ? profiled[index] : steady; }
};

EpochPlan plan_epochs(const WorkloadModel& model, int64_t bs, int64_t chosen_w, bool profile,
                      const SimulationOptions& o) {
  EpochPlan plan;
  plan.steady = {model.epoch_energy_j(bs, chosen_w), model.epoch_time_s(bs, chosen_w)};
  if (!profile) {
    return plan;
  }
  const auto& limits = model.power_limits_w(bs);
  if (o.fidelity == Fidelity::kZeus) {
    EpochCost mean;
    for (const int64_t pl : limits) {
      mean.energy_j += model.epoch_energy_j(bs, pl) / static_cast<double>(limits.size());
      mean.time_s += model.epoch_time_s(bs, pl) / static_cast<double>(limits.size());
    }
    plan.profiled.push_back(mean);
    return plan;
  }
  // kWindows: walk the profiler's schedule iteration by iteration (highest limit first).
  const int64_t n = model.iterations_per_epoch(bs);
  const auto fitted = optimize::fit_windows(o.warmup_iters, o.profile_iters, n);
  if (!fitted) {
    throw ConfigError(fmt::format(
        "{} {} batch size {}: an epoch of {} iterations is too short to profile a power limit "
        "({}+{} iterations); lower the windows (ZEUS_PROFILE_PARAMS)",
        model.gpu(), model.job().dataset, bs, n, o.warmup_iters, o.profile_iters));
  }
  const int64_t window = fitted->first + fitted->second;
  auto per_iteration = [&](int64_t pl, int64_t iterations) {
    const double share = static_cast<double>(iterations) / static_cast<double>(n);
    return EpochCost{model.epoch_energy_j(bs, pl) * share, model.epoch_time_s(bs, pl) * share};
  };
  std::vector<int64_t> order(limits.rbegin(), limits.rend());
  size_t next = 0;
  int64_t current = limits.back();  // the GPU starts at its maximum
  while (next < order.size()) {
    EpochCost epoch;
    int64_t left = n;
    while (left > 0) {
      EpochCost part;
      if (next < order.size() && left >= window) {
        part = per_iteration(order[next], window);
        left -= window;
        current = ++next == order.size() ? chosen_w : order[next - 1];
      } else {
        part = per_iteration(current, left);
        left = 0;
      }
      epoch.energy_j += part.energy_j;
      epoch.time_s += part.time_s;
    }
    plan.profiled.push_back(epoch);
  }
  return plan;
}

// The epochs a try may run under `threshold` (0: not even one).
int64_t allowed_epochs(const EpochPlan& plan, const optimize::CostModel& cost,
                       const optimize::CostModel& epoch_cost_model, double threshold,
                       int64_t max_epochs, Fidelity fidelity) {
  if (!std::isfinite(threshold)) {
    return max_epochs;
  }
  if (fidelity == Fidelity::kZeus) {
    // Zeus: cost_ub // cost_per_epoch at the chosen limit, with that batch size's MAXPOWER.
    const double per_epoch = epoch_cost_model.cost(plan.steady.energy_j, plan.steady.time_s);
    return std::min<int64_t>(max_epochs, static_cast<int64_t>(std::floor(threshold / per_epoch)));
  }
  double so_far = 0;
  int64_t n = 0;
  while (n < max_epochs) {
    const EpochCost e = plan.epoch(static_cast<size_t>(n));
    const double next = so_far + cost.cost(e.energy_j, e.time_s);
    const bool profiling = static_cast<size_t>(n) < plan.profiled.size();
    if ((n == 0 || !profiling) && next >= threshold) {
      break;
    }
    so_far = next;
    ++n;
  }
  return n;
}

void check_options(const SimulationOptions& o) {
  if (o.recurrences < 0) {
    throw ConfigError(fmt::format("recurrences {} must be positive", o.recurrences));
  }
  if (o.warmup_iters < 1 || o.profile_iters < 1) {
    throw ConfigError(fmt::format("profiling windows {}+{} must both be at least 1 iteration",
                                  o.warmup_iters, o.profile_iters));
  }
}

}  // namespace

SimulationResult simulate(const WorkloadModel& model, const SimulationOptions& options) {
  check_options(options);
  const optimize::CostModel cost(options.eta, static_cast<double>(model.max_power_limit_w()));
  const Job& job = model.job();
  SimulationResult result;
  result.gpu = model.gpu();
  result.workload = std::string(job.dataset);
  result.seed = options.seed;
  result.policy = options.policy;
  result.jit_limits_w = jit_power_limits_w(model, options.eta, options.selector);

  // Baseline: b0 at its maximum limit, the expectation over its runs.
  const int64_t b0 = model.default_batch_size();
  const int64_t b0_max = model.max_power_limit_w(b0);
  const double b0_epochs = *mean_epochs(model.runs(b0), job.max_epochs, false);
  result.baseline = {b0, b0_max, b0_epochs * model.epoch_energy_j(b0, b0_max),
                     b0_epochs * model.epoch_time_s(b0, b0_max), 0};
  result.baseline.cost = cost.cost(result.baseline.energy_j, result.baseline.time_s);

  // Oracle: the best static (b, pl) among batch sizes whose every run reaches the target.
  result.oracle.cost = std::numeric_limits<double>::infinity();
  for (const int64_t bs : model.batch_sizes()) {
    const auto epochs = mean_epochs(model.runs(bs), job.max_epochs, true);
    if (!epochs) {
      continue;
    }
    for (const int64_t pl : model.power_limits_w(bs)) {
      const double e = *epochs * model.epoch_energy_j(bs, pl);
      const double t = *epochs * model.epoch_time_s(bs, pl);
      const double c = cost.cost(e, t);
      if (c < result.oracle.cost) {
        result.oracle = {bs, pl, e, t, c};
      }
    }
  }

  optimize::BatchSizeOptimizer bso({.batch_sizes = model.batch_sizes(),
                                    .default_batch_size = b0,
                                    .beta = options.beta,
                                    .seed = options.seed,
                                    .policy = options.policy,
                                    .lean = options.lean});
  // Runs are sampled from their own stream, so the optimizer's draws do not shift them.
  std::mt19937_64 run_rng(options.seed * 0x9E3779B97F4A7C15ULL + 1);

  const int recurrences =
      options.recurrences > 0 ? options.recurrences : model.default_recurrences();
  std::set<int64_t> profiled;
  for (int r = 0; r < recurrences; ++r) {
    RecurrenceRecord rec;
    const double threshold = bso.cost_threshold();
    double cost_so_far = 0;
    while (rec.tries < options.max_tries_per_recurrence && !rec.reached) {
      ++rec.tries;
      const int64_t bs = bso.next_batch_size();
      TryRecord t;
      t.recurrence = r;
      t.batch_size = bs;
      t.power_limit_w = result.jit_limits_w.at(bs);
      t.pruning = bso.pruning();
      t.epoch_cap = bso.epoch_cap();
      const bool profile = !profiled.contains(bs);
      const EpochPlan plan = plan_epochs(model, bs, t.power_limit_w, profile, options);
      const optimize::CostModel bs_cost(options.eta,
                                        static_cast<double>(model.max_power_limit_w(bs)));
      int64_t allowed =
          allowed_epochs(plan, cost, bs_cost, threshold, job.max_epochs, options.fidelity);
      if (t.epoch_cap) {
        allowed = std::min(allowed, *t.epoch_cap);
      }
      if (allowed == 0) {
        // Cannot afford one epoch under the threshold: a failure that costs nothing to run.
        t.ran = false;
        t.cost = 100.0 * options.beta * bso.min_cost();
        bso.observe({bs, t.cost, false});
        result.tries.push_back(t);
        continue;
      }
      const auto& runs = model.runs(bs);
      const std::optional<int64_t> target_epoch = runs[uniform_index(run_rng, runs.size())];
      t.reached = target_epoch && std::max<int64_t>(*target_epoch, 1) <= allowed;
      t.epochs = t.reached ? std::max<int64_t>(*target_epoch, 1) : allowed;
      for (int64_t i = 0; i < t.epochs; ++i) {
        const EpochCost e = plan.epoch(static_cast<size_t>(i));
        t.energy_j += e.energy_j;
        t.time_s += e.time_s;
        if (static_cast<size_t>(i) < plan.profiled.size()) {
          t.profiling_energy_j += e.energy_j - plan.steady.energy_j;
        }
      }
      t.cost = cost.cost(t.energy_j, t.time_s);
      profiled.insert(bs);
      rec.energy_j += t.energy_j;
      rec.time_s += t.time_s;
      cost_so_far += t.cost;
      rec.batch_size = bs;
      rec.power_limit_w = t.power_limit_w;
      rec.reached = t.reached;
      bso.observe({bs, t.cost, t.reached, t.reached ? cost_so_far : 0.0, t.epochs});
      result.tries.push_back(t);
    }
    rec.cost = cost_so_far;
    result.zeus_energy_j += rec.energy_j;
    result.zeus_time_s += rec.time_s;
    result.zeus_cost += rec.cost;
    result.recurrences.push_back(rec);
  }
  result.baseline_energy_j = result.baseline.energy_j * recurrences;
  result.baseline_time_s = result.baseline.time_s * recurrences;
  result.baseline_cost = result.baseline.cost * recurrences;
  const size_t last = std::min<size_t>(10, result.recurrences.size());
  for (size_t i = result.recurrences.size() - last; i < result.recurrences.size(); ++i) {
    result.last10_energy_j += result.recurrences[i].energy_j / static_cast<double>(last);
    result.last10_time_s += result.recurrences[i].time_s / static_cast<double>(last);
  }
  result.final_batch_size = result.recurrences.back().batch_size;
  result.final_power_limit_w = result.recurrences.back().power_limit_w;
  return result;
}

}  // namespace zeus::sim
