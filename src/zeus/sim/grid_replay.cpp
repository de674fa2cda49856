#include "zeus/sim/grid_replay.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "zeus/common/errors.h"
#include "zeus/optimize/grid_rule.h"

namespace zeus::sim {
namespace {

// The trace as offsets from its first row, repeating every span_s.
class Timeline {
 public:
  explicit Timeline(const grid::SignalTrace& trace) {
    const auto first = trace.points().front().at;
    for (const auto& p : trace.points()) {
      offsets_s_.push_back(std::chrono::duration<double>(p.at - first).count());
      values_.push_back(p.value);
    }
    span_s_ = std::chrono::duration<double>(trace.span()).count();
  }
  double span_s() const { return span_s_; }
  size_t row(double t) const {
    const double tt = std::fmod(t, span_s_);
    const auto it = std::upper_bound(offsets_s_.begin(), offsets_s_.end(), tt);
    return it == offsets_s_.begin() ? 0 : static_cast<size_t>(it - offsets_s_.begin()) - 1;
  }
  double value(double t) const { return values_[row(t)]; }
  // The mean over [t, t + horizon), the trace repeating.
  double mean(double t, double horizon) const {
    // Offsets from the value at t, so that rows of one value average to it exactly.
    const double base = value(t);
    double weighted = 0;
    for (double at = t; at < t + horizon;) {
      const double end = std::min(next_boundary(at), t + horizon);
      weighted += (value(at) - base) * (end - at);
      at = end;
    }
    return base + weighted / horizon;
  }
  // The time the row after t's begins.
  double next_boundary(double t) const {
    const double base = t - std::fmod(t, span_s_);
    const size_t i = row(t) + 1;
    return base + (i < offsets_s_.size() ? offsets_s_[i] : span_s_);
  }

 private:
  std::vector<double> offsets_s_;
  std::vector<double> values_;
  double span_s_ = 0;
};

struct Rates {
  double time_per_iter_s = 0;
  double power_w = 0;
};

int64_t median_epochs(const WorkloadModel& model, int64_t batch_size) {
  std::vector<int64_t> reached;
  for (const auto& run : model.runs(batch_size)) {
    if (run) {
      reached.push_back(*run);
    }
  }
  if (reached.empty()) {
    return model.job().max_epochs;  // never reached: the job runs to its epoch limit
  }
  std::sort(reached.begin(), reached.end());
  return reached[reached.size() / 2];
}

}  // namespace

namespace {

GridRun total(const std::vector<GridJobRecord>& jobs, GridRun GridJobRecord::*policy) {
  GridRun t;
  for (const auto& j : jobs) {
    const GridRun& r = j.*policy;
    t.time_s += r.time_s;
    t.energy_j += r.energy_j;
    t.amount += r.amount;
    t.limit_changes += r.limit_changes;
  }
  return t;
}

}  // namespace

GridRun GridReplayResult::zeus_total() const {
  return total(jobs, &GridJobRecord::zeus);
}
GridRun GridReplayResult::rule_total() const {
  return total(jobs, &GridJobRecord::rule);
}
GridRun GridReplayResult::max_limit_total() const {
  return total(jobs, &GridJobRecord::max_limit);
}

double GridReplayResult::amount_saving() const {
  return 1.0 - rule_total().amount / zeus_total().amount;
}
double GridReplayResult::energy_saving() const {
  return 1.0 - rule_total().energy_j / zeus_total().energy_j;
}
double GridReplayResult::time_change() const {
  return rule_total().time_s / zeus_total().time_s - 1.0;
}

GridReplayResult replay_grid(const WorkloadModel& model, const grid::SignalTrace& trace,
                             const GridReplayOptions& options) {
  GridReplayResult result;
  result.gpu = model.gpu();
  result.workload = std::string(model.job().dataset);
  const int64_t bs = options.batch_size > 0 ? options.batch_size : model.default_batch_size();
  const auto& sizes = model.batch_sizes();
  if (std::find(sizes.begin(), sizes.end(), bs) == sizes.end()) {
    throw ConfigError(fmt::format("{} {}: batch size {} is not in the traces (they have {})",
                                  model.gpu(), model.job().dataset, bs, fmt::join(sizes, ", ")));
  }
  if (options.recurrences < 0) {
    throw ConfigError(fmt::format("recurrences {} is negative", options.recurrences));
  }
  result.batch_size = bs;
  result.epochs = median_epochs(model, bs);
  const double iterations = static_cast<double>(result.epochs * model.iterations_per_epoch(bs));

  // Zeus's profile of this batch size, from the traces (throughput and power per limit).
  std::vector<optimize::LimitMeasurement> profile;
  std::map<int64_t, Rates> rates;  // by limit, mW
  for (const int64_t w : model.power_limits_w(bs)) {
    const double epoch_s = model.epoch_time_s(bs, w);
    const double iters = static_cast<double>(model.iterations_per_epoch(bs));
    const double power_w = model.epoch_energy_j(bs, w) / epoch_s;
    profile.push_back({w * 1000, iters / epoch_s, power_w});
    rates[w * 1000] = {epoch_s / iters, power_w};
  }
  optimize::GridFollowerOptions follow;
  follow.eta = options.eta;
  follow.max_power_w = static_cast<double>(model.max_power_limit_w(bs));
  follow.signal_max = options.signal_max;
  follow.interval = options.interval;
  follow.relative_change = options.relative_change;
  const optimize::GridFollower zeus_rule(profile, follow);
  result.zeus_limit_w = zeus_rule.zeus_limit_mw() / 1000;
  const Timeline timeline(trace);
  const double interval_s = std::chrono::duration<double>(options.interval).count();
  std::set<int64_t> used;

  // One job from `start` (s since the trace's first row) under a policy.
  // fixed_mw: a fixed limit (Zeus's, the maximum); 0 follows the grid.
  auto run_job = [&](double start, int64_t fixed_mw) {
    const bool follow_grid = fixed_mw == 0;
    GridRun run;
    run.start_s = start;
    optimize::GridFollower rule(profile, follow);
    int64_t limit = follow_grid ? zeus_rule.zeus_limit_mw() : fixed_mw;
    double t = start;
    double left = iterations;
    double last_choice = start;
    bool first = true;
    while (left > 1e-9) {
      const double signal = timeline.value(t);
      if (follow_grid) {
        const std::optional<double> forecast =
            options.forecast ? std::optional(timeline.mean(t, interval_s)) : std::nullopt;
        if (auto choice = rule.observe(signal,
                                       std::chrono::duration_cast<std::chrono::nanoseconds>(
                                           std::chrono::duration<double>(t)),
                                       forecast)) {
          last_choice = t;
          if (choice->limit_mw != limit && !first) {
            ++run.limit_changes;
          }
          limit = choice->limit_mw;
          first = false;
        }
        used.insert(limit / 1000);
      }
      const Rates& r = rates.at(limit);
      double until = timeline.next_boundary(t);
      if (follow_grid) {
        // A microsecond past the interval, so that the rule surely sees it as passed.
        until = std::min(until, last_choice + interval_s + 1e-6);
      }
      const double done_at = t + left * r.time_per_iter_s;
      const double end = std::min(until, done_at);
      const double dt = end - t;
      const double energy = dt * r.power_w;
      run.energy_j += energy;
      run.amount += grid::amount_of(energy, signal);
      left -= dt / r.time_per_iter_s;
      t = end;
      if (end == done_at) {
        break;
      }
    }
    run.time_s = t - start;
    return run;
  };

  int n = options.recurrences;
  double zeus_t = 0;
  double rule_t = 0;
  double max_t = 0;
  const int64_t max_mw = model.max_power_limit_w(bs) * 1000;
  for (int i = 0; n == 0 ? (i == 0 || zeus_t < timeline.span_s()) : i < n; ++i) {
    GridJobRecord rec{run_job(zeus_t, zeus_rule.zeus_limit_mw()), run_job(rule_t, 0),
                      run_job(max_t, max_mw)};
    zeus_t += rec.zeus.time_s;
    rule_t += rec.rule.time_s;
    max_t += rec.max_limit.time_s;
    result.jobs.push_back(rec);
    if (result.jobs.size() > 100'000) {
      throw ConfigError("more than 100000 recurrences: give --recurrences");
    }
  }
  result.rule_limits_w.assign(used.begin(), used.end());
  return result;
}

}  // namespace zeus::sim
