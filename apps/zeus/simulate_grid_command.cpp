// zeus simulate --carbon/--price: the paper's recurring jobs back to back from a signal trace's
// first hour, Zeus's fixed power limit against the rule that follows the signal
// (sim/grid_replay.h): carbon (or money), energy and time, per job and overall.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/common/units.h"
#include "zeus/grid/signal_trace.h"
#include "zeus/optimize/grid_rule.h"
#include "zeus/sim/grid_replay.h"

namespace zeus::cli {
namespace {

nlohmann::json run_json(const sim::GridRun& r) {
  return {{"time_s", r.time_s},
          {"energy_j", r.energy_j},
          {"amount", r.amount},
          {"cost", r.cost},
          {"limit_changes", r.limit_changes}};
}

nlohmann::json result_json(const sim::GridReplayResult& r) {
  nlohmann::json jobs = nlohmann::json::array();
  for (const auto& j : r.jobs) {
    jobs.push_back({{"zeus", run_json(j.zeus)},
                    {"rule", run_json(j.rule)},
                    {"max_limit", run_json(j.max_limit)},
                    {"bound", run_json(j.bound)}});
  }
  return {{"gpu", r.gpu},
          {"workload", r.workload},
          {"batch_size", r.batch_size},
          {"epochs", r.epochs},
          {"zeus_limit_w", r.zeus_limit_w},
          {"rule_limits_w", r.rule_limits_w},
          {"recurrences", r.jobs.size()},
          {"zeus", run_json(r.zeus_total())},
          {"rule", run_json(r.rule_total())},
          {"max_limit", run_json(r.max_limit_total())},
          {"bound", run_json(r.bound_total())},
          {"gap_closed", r.gap_closed() ? nlohmann::json(*r.gap_closed()) : nlohmann::json()},
          {"amount_saving", r.amount_saving()},
          {"energy_saving", r.energy_saving()},
          {"time_change", r.time_change()},
          {"jobs", jobs}};
}

}  // namespace

int run_simulate_grid(const SimulateCommandOptions& o, std::ostream& out, std::ostream& err) {
  std::vector<sim::GridReplayResult> results;
  grid::SignalKind kind = grid::SignalKind::kCarbonIntensity;
  double signal_max = 0;
  std::string trace_path;
  try {
    if (!o.carbon.empty() && !o.price.empty()) {
      throw ConfigError("--carbon and --price: give one signal, not both");
    }
    if (!o.dp.empty()) {
      throw ConfigError("--dp with --carbon/--price: the grid replay runs one GPU per job");
    }
    if (!(o.eta >= 0.0 && o.eta <= 1.0)) {
      throw ConfigError(fmt::format("--eta {} is outside [0, 1]", o.eta));
    }
    if (o.recurrences == 0 || o.recurrences < -1) {
      throw ConfigError(fmt::format("--recurrences {} must be at least 1", o.recurrences));
    }
    if (!(o.relative_change >= 0)) {
      throw ConfigError(fmt::format("--relative-change {} is negative", o.relative_change));
    }
    kind =
        o.carbon.empty() ? grid::SignalKind::kElectricityPrice : grid::SignalKind::kCarbonIntensity;
    trace_path = o.carbon.empty() ? o.price : o.carbon;
    const grid::SignalTrace signal = grid::SignalTrace::load(trace_path, kind);
    // The grid's own reference by default (Note [grid reference]); the trace's mean or maximum
    // as fixed ones beside Chase's and any number.
    if (o.max_signal == "mean") {
      signal_max = signal.mean();
    } else if (o.max_signal == "max") {
      signal_max = signal.max();
    } else {
      signal_max = optimize::parse_grid_reference(o.max_signal.empty() ? "grid" : o.max_signal,
                                                  "--max-signal",
                                                  kind == grid::SignalKind::kCarbonIntensity);
    }
    if (!(signal_max > 0) && o.max_signal != "grid" && !o.max_signal.empty()) {
      throw ConfigError(fmt::format("{}: every price is 0; give --max-signal", trace_path));
    }
    sim::GridReplayOptions options;
    options.eta = o.eta;
    options.signal_max = signal_max;
    options.interval = parse_duration(o.interval, "--interval");
    if (options.interval.count() <= 0) {
      throw ConfigError("--interval must be positive");
    }
    options.relative_change = o.relative_change;
    options.forecast = !o.no_forecast;
    options.recurrences = std::max(o.recurrences, 0);
    options.batch_size = o.batch_size;

    for_each_traced_job(o, [&](const sim::WorkloadModel& model) {
      results.push_back(sim::replay_grid(model, signal, options));
    });
  } catch (const Error& e) {
    err << "zeus simulate: error: " << e.what() << "\n";
    return kExitUsage;
  }

  const bool carbon = kind == grid::SignalKind::kCarbonIntensity;
  const char* amount_name = carbon ? "gCO2eq" : "$";
  if (o.format == "json") {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& r : results) {
      all.push_back(result_json(r));
    }
    out << nlohmann::json{{"signal", carbon ? "carbon_intensity" : "electricity_price"},
                          {"trace", trace_path},
                          {"signal_max",
                           signal_max > 0 ? nlohmann::json(signal_max) : nlohmann::json("grid")},
                          {"eta", o.eta},
                          {"interval", o.interval},
                          {"forecast", !o.no_forecast},
                          {"jobs", all}}
               .dump(2)
        << "\n";
    return kExitOk;
  }
  out << fmt::format(
      "zeus simulate: {} from {} (S_max {}), eta {}, the rule chooses again every {} or "
      "when the signal moves > {:g}%, on {}; Zeus's fixed limit against the rule, jobs back to "
      "back\n",
      grid::to_string(kind), trace_path,
      signal_max > 0 ? fmt::format("{:g} {}", signal_max, grid::unit(kind))
                     : std::string("the grid's: its mean over the day before each choice"),
      o.eta, o.interval, 100 * o.relative_change,
      o.no_forecast ? "the signal now" : "the next interval's mean (a perfect forecast)");
  out << fmt::format("{:<8} {:<13} {:>5} {:>6} {:>6} {:>10} {:>16} {:>12} {:>12} {:>12} {:>12}\n",
                     "gpu", "workload", "bs", "jobs", "zeus W", "rule W",
                     fmt::format("{} saved", amount_name), "energy saved", "time change",
                     "gap closed", fmt::format("zeus {}", amount_name));
  double zeus_amount = 0;
  double rule_amount = 0;
  double zeus_energy = 0;
  double rule_energy = 0;
  double zeus_time = 0;
  double rule_time = 0;
  double max_amount = 0;
  double max_time = 0;
  double bound_time = 0;
  double zeus_cost = 0;
  double rule_cost = 0;
  double bound_cost = 0;
  for (const auto& r : results) {
    const auto z = r.zeus_total();
    const auto g = r.rule_total();
    zeus_amount += z.amount;
    rule_amount += g.amount;
    zeus_energy += z.energy_j;
    rule_energy += g.energy_j;
    zeus_time += z.time_s;
    rule_time += g.time_s;
    max_amount += r.max_limit_total().amount;
    max_time += r.max_limit_total().time_s;
    bound_time += r.bound_total().time_s;
    zeus_cost += z.cost;
    rule_cost += g.cost;
    bound_cost += r.bound_total().cost;
    const std::string rule_w =
        r.rule_limits_w.size() == 1
            ? std::to_string(r.rule_limits_w.front())
            : fmt::format("{}-{}", r.rule_limits_w.front(), r.rule_limits_w.back());
    out << fmt::format(
        "{:<8} {:<13} {:>5} {:>6} {:>6} {:>10} {:>15.1f}% {:>11.1f}% {:>+11.1f}% {:>12} "
        "{:>12.4g}\n",
        r.gpu, r.workload, r.batch_size, r.jobs.size(), r.zeus_limit_w, rule_w,
        100 * r.amount_saving(), 100 * r.energy_saving(), 100 * r.time_change(),
        r.gap_closed() ? fmt::format("{:.0f}%", 100 * *r.gap_closed()) : std::string("-"),
        z.amount);
  }
  out << fmt::format(
      "overall ({} jobs): {} saved {:.2f}%, energy saved {:.2f}%, time change {:+.2f}%\n",
      results.size(), amount_name, 100 * (1 - rule_amount / zeus_amount),
      100 * (1 - rule_energy / zeus_energy), 100 * (rule_time / zeus_time - 1));
  const double gap = zeus_cost - bound_cost;
  out << fmt::format(
      "the rule's cost (eta x {} + (1 - eta) x MAXPOWER x time at the reference) is {:.2f}% below "
      "Zeus's; the offline bound's (the whole trace known, limits mixed at will) {:.2f}% below, "
      "at {:+.2f}% time: the rule gets {} of that gap\n",
      amount_name, 100 * (1 - rule_cost / zeus_cost), 100 * (1 - bound_cost / zeus_cost),
      100 * (bound_time / zeus_time - 1),
      gap > 1e-12 * zeus_cost ? fmt::format("{:.0f}%", 100 * (zeus_cost - rule_cost) / gap)
                              : std::string("all (there is none)"));
  out << fmt::format(
      "against the maximum limit (the Default): Zeus's fixed limit saves {:.2f}% {} at {:+.2f}% "
      "time, the rule {:.2f}% at {:+.2f}%\n",
      100 * (1 - zeus_amount / max_amount), amount_name, 100 * (zeus_time / max_time - 1),
      100 * (1 - rule_amount / max_amount), 100 * (rule_time / max_time - 1));
  return kExitOk;
}

}  // namespace zeus::cli
