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
  // The mean over the `window` before t (t - window may come before the first row: the trace
  // repeats backwards too).
  double trailing_mean(double t, double window) const {
    double from = t - window;
    if (from < 0) {
      from += std::ceil(-from / span_s_) * span_s_;
    }
    return mean(from, window);
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

constexpr double kDay_s =
    std::chrono::duration<double>(grid::kReferenceWindow).count();  // the reference's window

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
    t.cost += r.cost;
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
GridRun GridReplayResult::bound_total() const {
  return total(jobs, &GridJobRecord::bound);
}
std::optional<double> GridReplayResult::gap_closed() const {
  const double gap = zeus_total().cost - bound_total().cost;
  if (!(gap > 1e-12 * zeus_total().cost)) {
    return std::nullopt;
  }
  return (zeus_total().cost - rule_total().cost) / gap;
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

  // The reference in force at t (the rule's, and the cost's), and the cost of running `dt` s at
  // `power_w` from t (eta x amount + (1 - eta) x MAXPOWER x time at the reference).
  const auto reference_at = [&](double t) {
    return options.signal_max > 0 ? options.signal_max : timeline.trailing_mean(t, kDay_s);
  };
  const double max_power_w = follow.max_power_w;
  const auto cost_of = [&](double t, double dt, double power_w, double signal) {
    return options.eta * grid::amount_of(dt * power_w, signal) +
           (1 - options.eta) * grid::amount_of(dt * max_power_w, reference_at(t));
  };

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
        const std::optional<double> reference =
            options.signal_max > 0 ? std::nullopt : std::optional(reference_at(t));
        if (auto choice = rule.observe(signal,
                                       std::chrono::duration_cast<std::chrono::nanoseconds>(
                                           std::chrono::duration<double>(t)),
                                       forecast, reference)) {
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
      run.cost += cost_of(t, dt, r.power_w, signal);
      left -= dt / r.time_per_iter_s;
      t = end;
      if (end == done_at) {
        break;
      }
    }
    run.time_s = t - start;
    return run;
  };

  // The offline bound of one job (Note [offline bound]): the linear program's optimum over the
  // time each limit runs in each row, for each end time, the least over end times.
  struct Row {
    double length_s = 0;
    double cost_at_rest = 0;  // (1 - eta) MAXPOWER S_max per s: charged whatever the limit
    double signal = 0;
  };
  std::vector<const Rates*> by_limit;
  const Rates* by_limit_fastest = nullptr;
  for (const auto& [mw, r] : rates) {
    by_limit.push_back(&r);
    if (by_limit_fastest == nullptr || r.time_per_iter_s < by_limit_fastest->time_per_iter_s) {
      by_limit_fastest = &r;
    }
  }
  const auto rows_from = [&](double start, double span) {
    std::vector<Row> rows;
    for (double t = start; t < start + span;) {
      const double end = std::min(timeline.next_boundary(t), start + span);
      rows.push_back(
          {end - t, (1 - options.eta) * max_power_w * reference_at(t) / 3.6e6, timeline.value(t)});
      t = end;
    }
    return rows;
  };
  // The least cost of the work in exactly `rows` (each run through, limits mixed at will): the
  // dual max_lambda lambda W + sum_r L_r min_p (c_rp - lambda v_p), by bisection on its slope.
  // std::nullopt where no mix does the work in exactly those rows (the fastest limit too slow, or
  // the slowest too fast), within a relative 1e-9 of the work.
  const auto least_cost = [&](const std::vector<Row>& rows) -> std::optional<double> {
    const auto dual = [&](double lambda, double* progress) {
      double g = lambda * iterations;
      *progress = 0;
      for (const Row& row : rows) {
        const Rates* best = nullptr;
        double best_score = 0;
        for (const Rates* r : by_limit) {
          const double c = options.eta * r->power_w * row.signal / 3.6e6 + row.cost_at_rest;
          const double score = c - lambda / r->time_per_iter_s;
          if (best == nullptr || score < best_score) {
            best = r;
            best_score = score;
          }
        }
        g += row.length_s * best_score;
        *progress += row.length_s / best->time_per_iter_s;
      }
      return g;
    };
    double fast = 0;
    double slow = 0;
    for (const Row& row : rows) {
      double most = 0;
      double least = INFINITY;
      for (const Rates* r : by_limit) {
        most = std::max(most, 1 / r->time_per_iter_s);
        least = std::min(least, 1 / r->time_per_iter_s);
      }
      fast += row.length_s * most;
      slow += row.length_s * least;
    }
    const double tolerance = 1e-9 * iterations;
    if (fast < iterations - tolerance || slow > iterations + tolerance) {
      return std::nullopt;
    }
    if (fast <= iterations + tolerance) {  // only the fastest limit does it (in every row)
      double c = 0;
      for (const Row& row : rows) {
        double cheapest = INFINITY;
        for (const Rates* r : by_limit) {
          if (1 / r->time_per_iter_s >= 1 / by_limit_fastest->time_per_iter_s * (1 - 1e-12)) {
            cheapest = std::min(cheapest,
                                options.eta * r->power_w * row.signal / 3.6e6 + row.cost_at_rest);
          }
        }
        c += row.length_s * cheapest;
      }
      return c;
    }
    double lo = 0;
    double hi = 1e-9;
    double progress = 0;
    for (dual(hi, &progress); progress < iterations && hi < 1e30; dual(hi, &progress)) {
      lo = hi;
      hi *= 4;
    }
    for (int i = 0; i < 80; ++i) {
      const double mid = 0.5 * (lo + hi);
      dual(mid, &progress);
      (progress < iterations ? lo : hi) = mid;
    }
    double ignored = 0;
    return std::max(dual(lo, &ignored), dual(hi, &ignored));
  };
  auto bound_job = [&](double start, const GridRun& rule) {
    // End times from the fastest limit's to the slowest's, the rule's own among them (so the
    // bound is never above the rule: the rule's run is one of the program's points).
    double fastest = INFINITY;
    double slowest = 0;
    for (const Rates* r : by_limit) {
      fastest = std::min(fastest, iterations * r->time_per_iter_s);
      slowest = std::max(slowest, iterations * r->time_per_iter_s);
    }
    GridRun best = rule;  // the rule's run is one point of the program at its end
    best.cost = least_cost(rows_from(start, rule.time_s)).value_or(rule.cost);
    for (int i = 0; i <= 48; ++i) {
      const double span = fastest + (slowest - fastest) * i / 48.0;
      const auto c = least_cost(rows_from(start, span));
      if (c && *c < best.cost) {
        best.cost = *c;
        best.time_s = span;
      }
    }
    best.amount = 0;  // a mix of limits: its amount alone is not kept
    best.energy_j = 0;
    best.limit_changes = 0;
    best.start_s = start;
    return best;
  };

  int n = options.recurrences;
  double zeus_t = 0;
  double rule_t = 0;
  double max_t = 0;
  const int64_t max_mw = model.max_power_limit_w(bs) * 1000;
  for (int i = 0; n == 0 ? (i == 0 || zeus_t < timeline.span_s()) : i < n; ++i) {
    GridJobRecord rec{
        run_job(zeus_t, zeus_rule.zeus_limit_mw()), run_job(rule_t, 0), run_job(max_t, max_mw), {}};
    rec.bound = bound_job(rule_t, rec.rule);
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
