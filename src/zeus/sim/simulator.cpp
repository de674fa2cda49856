#include "zeus/sim/simulator.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/optimize/batch_size_optimizer.h"
#include "zeus/optimize/cost.h"

namespace zeus::sim {
WorkloadModel::WorkloadModel(std::string gpu, const Job& job, const trace::PowerTrace& power,
                             const trace::TrainTrace& train)
    : gpu_(std::move(gpu)), job_(job) {
  std::map<int64_t, std::set<int64_t>> limits_by_bs;
  for (const auto& row : power.rows()) {
    if (iequals(row.dataset, job.dataset) && iequals(row.network, job.network) &&
        iequals(row.optimizer, job.optimizer)) {
      points_[{row.batch_size, row.power_limit_w}] = {row.time_per_epoch_s, row.average_power_w};
      limits_by_bs[row.batch_size].insert(row.power_limit_w);
    }
  }
  const auto trained =
      train.batch_sizes(job.dataset, job.network, job.optimizer, job.target_metric);
  std::set<int64_t> common_limits;
  bool first = true;
  for (const int64_t bs : trained) {
    const auto it = limits_by_bs.find(bs);
    if (it == limits_by_bs.end()) {
      continue;
    }
    batch_sizes_.push_back(bs);
    runs_[bs] = train.target_epochs(job.dataset, job.network, job.optimizer, bs, job.target_metric);
    if (first) {
      common_limits = it->second;
      first = false;
    } else {
      std::set<int64_t> both;
      std::set_intersection(common_limits.begin(), common_limits.end(), it->second.begin(),
                            it->second.end(), std::inserter(both, both.begin()));
      common_limits = std::move(both);
    }
  }
  if (batch_sizes_.empty() || common_limits.empty()) {
    throw ConfigError(fmt::format(
        "{} traces ({}) and the training trace share no batch size for {} ({}, {}, target {}); "
        "check the trace files",
        gpu_, power.source(), job.dataset, job.network, job.optimizer, job.target_metric));
  }
  power_limits_w_.assign(common_limits.begin(), common_limits.end());
  // b0, capped at the largest batch size this GPU has.
  default_batch_size_ = batch_sizes_.front();
  for (const int64_t bs : batch_sizes_) {
    if (bs <= job.default_batch_size) {
      default_batch_size_ = bs;
    }
  }
}

const WorkloadModel::Point& WorkloadModel::point(int64_t batch_size, int64_t power_limit_w) const {
  const auto it = points_.find({batch_size, power_limit_w});
  ZEUS_ASSERT(it != points_.end(), "no trace point for batch size {} at {} W", batch_size,
              power_limit_w);
  return it->second;
}

double WorkloadModel::epoch_time_s(int64_t batch_size, int64_t power_limit_w) const {
  return point(batch_size, power_limit_w).time_s;
}

double WorkloadModel::epoch_energy_j(int64_t batch_size, int64_t power_limit_w) const {
  const Point& p = point(batch_size, power_limit_w);
  return p.time_s * p.power_w;
}

const std::vector<std::optional<int64_t>>& WorkloadModel::runs(int64_t batch_size) const {
  return runs_.at(batch_size);
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

}  // namespace

SimulationResult simulate(const WorkloadModel& model, const SimulationOptions& options) {
  const optimize::CostModel cost(options.eta, static_cast<double>(model.max_power_limit_w()));
  if (options.recurrences < 0) {
    throw ConfigError(fmt::format("recurrences {} must be positive", options.recurrences));
  }
  const Job& job = model.job();
  SimulationResult result;
  result.gpu = model.gpu();
  result.workload = std::string(job.dataset);
  result.seed = options.seed;

  // The JIT profiler's choice per batch size, from the trace with the same selector code.
  for (const int64_t bs : model.batch_sizes()) {
    std::vector<optimize::LimitMeasurement> measured;
    for (const int64_t pl : model.power_limits_w()) {
      const double t = model.epoch_time_s(bs, pl);
      measured.push_back({pl * 1000, 1.0 / t, model.epoch_energy_j(bs, pl) / t});
    }
    result.jit_limits_w[bs] = optimize::select_power_limit(measured, cost, options.selector) / 1000;
  }

  // Baseline: b0 at the maximum limit, the expectation over its runs.
  const int64_t b0 = model.default_batch_size();
  const int64_t max_pl = model.max_power_limit_w();
  const double b0_epochs = *mean_epochs(model.runs(b0), job.max_epochs, false);
  result.baseline = {b0, max_pl, b0_epochs * model.epoch_energy_j(b0, max_pl),
                     b0_epochs * model.epoch_time_s(b0, max_pl), 0};
  result.baseline.cost = cost.cost(result.baseline.energy_j, result.baseline.time_s);

  // Oracle: the best static (b, pl) among batch sizes whose every run reaches the target.
  result.oracle.cost = std::numeric_limits<double>::infinity();
  for (const int64_t bs : model.batch_sizes()) {
    const auto epochs = mean_epochs(model.runs(bs), job.max_epochs, true);
    if (!epochs) {
      continue;
    }
    for (const int64_t pl : model.power_limits_w()) {
      const double e = *epochs * model.epoch_energy_j(bs, pl);
      const double t = *epochs * model.epoch_time_s(bs, pl);
      const double c = cost.cost(e, t);
      if (c < result.oracle.cost) {
        result.oracle = {bs, pl, e, t, c};
      }
    }
  }

  optimize::BatchSizeOptimizerOptions bso_options;
  bso_options.batch_sizes = model.batch_sizes();
  bso_options.default_batch_size = b0;
  bso_options.beta = options.beta;
  bso_options.seed = options.seed;
  optimize::BatchSizeOptimizer bso(bso_options);
  // Runs are sampled from their own stream, so the optimizer's draws do not shift them.
  std::mt19937_64 run_rng(options.seed * 0x9E3779B97F4A7C15ULL + 1);

  const int recurrences =
      options.recurrences > 0
          ? options.recurrences
          : static_cast<int>(2 * model.batch_sizes().size() * model.power_limits_w().size());
  std::set<int64_t> profiled;
  for (int r = 0; r < recurrences; ++r) {
    RecurrenceRecord rec;
    const double threshold = bso.cost_threshold();
    double cost_so_far = 0;
    while (rec.tries < options.max_tries_per_recurrence && !rec.reached) {
      ++rec.tries;
      const int64_t bs = bso.next_batch_size();
      const int64_t pl = result.jit_limits_w.at(bs);
      const double epoch_e = model.epoch_energy_j(bs, pl);
      const double epoch_t = model.epoch_time_s(bs, pl);
      // A batch size's first epoch profiles every limit: charge the mean over limits.
      double first_e = epoch_e;
      double first_t = epoch_t;
      if (!profiled.contains(bs)) {
        first_e = first_t = 0;
        for (const int64_t p : model.power_limits_w()) {
          first_e += model.epoch_energy_j(bs, p);
          first_t += model.epoch_time_s(bs, p);
        }
        first_e /= static_cast<double>(model.power_limits_w().size());
        first_t /= static_cast<double>(model.power_limits_w().size());
      }
      const double first_cost = cost.cost(first_e, first_t);
      const double epoch_cost = cost.cost(epoch_e, epoch_t);
      int64_t allowed = job.max_epochs;
      if (std::isfinite(threshold)) {
        allowed =
            first_cost > threshold
                ? 0
                : std::min<int64_t>(
                      job.max_epochs,
                      1 + static_cast<int64_t>(std::floor((threshold - first_cost) / epoch_cost)));
      }
      if (allowed == 0) {
        // Cannot afford one epoch under the threshold: a failure that costs nothing to run.
        bso.observe({bs, 100.0 * options.beta * bso.min_cost(), false});
        continue;
      }
      const auto& runs = model.runs(bs);
      std::uniform_int_distribution<size_t> pick(0, runs.size() - 1);
      const std::optional<int64_t> target_epoch = runs[pick(run_rng)];
      const bool reached = target_epoch && std::max<int64_t>(*target_epoch, 1) <= allowed;
      const int64_t epochs = reached ? std::max<int64_t>(*target_epoch, 1) : allowed;
      const double e = first_e + static_cast<double>(epochs - 1) * epoch_e;
      const double t = first_t + static_cast<double>(epochs - 1) * epoch_t;
      profiled.insert(bs);
      rec.energy_j += e;
      rec.time_s += t;
      cost_so_far += cost.cost(e, t);
      rec.batch_size = bs;
      rec.power_limit_w = pl;
      rec.reached = reached;
      bso.observe({bs, cost.cost(e, t), reached, reached ? cost_so_far : 0.0});
    }
    rec.cost = cost_so_far;
    result.zeus_energy_j += rec.energy_j;
    result.zeus_time_s += rec.time_s;
    result.recurrences.push_back(rec);
  }
  result.baseline_energy_j = result.baseline.energy_j * recurrences;
  result.baseline_time_s = result.baseline.time_s * recurrences;
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
