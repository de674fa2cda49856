// zeus simulate --dp: one data-parallel job over a mix of traced GPUs, Zeus's single power limit
// against the per-GPU plan, per epoch under the straggler model (optimize/per_gpu_plan.h).
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <nlohmann/json.hpp>
#include <ostream>

#include "cli.h"
#include "zeus/common/errors.h"
#include "zeus/common/power.h"
#include "zeus/sim/data_parallel.h"

namespace zeus::cli {
namespace {

std::vector<double> limits_w(const optimize::PlanOutcome& o) {
  std::vector<double> out;
  for (int64_t l : o.limits_mw) {
    out.push_back(mw_to_w(l));
  }
  return out;
}

nlohmann::json plan_json(const optimize::PlanOutcome& o) {
  return {
      {"limits_w", limits_w(o)}, {"energy_j", o.energy_j}, {"time_s", o.time_s}, {"cost", o.cost}};
}

// 1 - ours / theirs: the share the plan saves (negative: it spends more).
double saved(double ours, double theirs) {
  return theirs > 0 ? 1.0 - ours / theirs : 0.0;
}

}  // namespace

int run_simulate_dp(const SimulateCommandOptions& o, std::ostream& out, std::ostream& err) {
  std::vector<trace::GpuMixEntry> mix;
  sim::DataParallelComparison result;
  const trace::Workload* workload = nullptr;
  int64_t batch_size = 0;
  try {
    if (o.dp.empty()) {
      throw ConfigError("--batch-size goes with --dp MIX (e.g. --dp v100,v100*1.15)");
    }
    if (o.workload == "all") {
      throw ConfigError(
          "--dp needs one --workload (cifar100, imagenet, librispeech, "
          "movielens-1m, sentiment140 or squad)");
    }
    if (o.format == "csv") {
      throw ConfigError("--dp prints --format table or json");
    }
    if (!(o.eta >= 0.0 && o.eta <= 1.0)) {
      throw ConfigError(fmt::format("--eta {} is outside [0, 1]", o.eta));
    }
    if (o.batch_size < 0) {
      throw ConfigError(fmt::format("--batch-size {} must be positive", o.batch_size));
    }
    try {
      mix = trace::parse_gpu_mix(o.dp);
    } catch (const ConfigError& e) {
      throw ConfigError(fmt::format("--dp '{}': {}", o.dp, e.what()));
    }
    workload = &trace::find_workload(o.workload);
    batch_size = o.batch_size > 0 ? o.batch_size : workload->default_batch_size;
    const std::filesystem::path dir =
        o.trace_dir.empty() ? trace::trace_dir() : std::filesystem::path(o.trace_dir);
    const auto curves = sim::trace_curves(mix, workload->dataset, batch_size, dir);
    result = sim::compare_plans(curves, o.eta, optimize::parse_selector(o.selector));
  } catch (const Error& e) {
    err << "zeus simulate: error: " << e.what() << "\n";
    return kExitUsage;
  }
  const auto& plan = result.per_gpu;
  if (o.format == "json") {
    nlohmann::json j{{"mix", trace::format_gpu_mix(mix)},
                     {"workload", workload->dataset},
                     {"batch_size", batch_size},
                     {"eta", o.eta},
                     {"selector", o.selector},
                     {"unit", "epoch"},
                     {"global", result.global ? plan_json(*result.global) : nlohmann::json()},
                     {"per_gpu", plan_json(plan)}};
    if (result.global) {
      j["savings"] = {{"energy", saved(plan.energy_j, result.global->energy_j)},
                      {"cost", saved(plan.cost, result.global->cost)},
                      {"time", saved(plan.time_s, result.global->time_s)}};
    }
    out << j.dump(2) << "\n";
    return kExitOk;
  }
  out << fmt::format(
      "zeus simulate --dp {}: {} at batch size {} per GPU, eta {}, selector {}; per epoch, "
      "each step waiting for the slowest GPU\n",
      trace::format_gpu_mix(mix), workload->dataset, batch_size, o.eta, o.selector);
  out << fmt::format("{:<16} {:<28} {:>14} {:>10} {:>14}\n", "plan", "limits (W)", "energy (J)",
                     "time (s)", "cost");
  const auto row = [&](std::string_view name, const optimize::PlanOutcome& p) {
    out << fmt::format("{:<16} {:<28} {:>14.1f} {:>10.2f} {:>14.1f}\n", name,
                       fmt::format("{}", fmt::join(limits_w(p), ",")), p.energy_j, p.time_s,
                       p.cost);
  };
  if (result.global) {
    row("Zeus (one limit)", *result.global);
  } else {
    out << "Zeus (one limit) none: these GPUs share no power limit (upstream refuses the mix)\n";
  }
  row("per GPU", plan);
  if (result.global) {
    out << fmt::format("per-GPU limits save {:.1f}% energy, {:.1f}% cost and {:.1f}% time\n",
                       100 * saved(plan.energy_j, result.global->energy_j),
                       100 * saved(plan.cost, result.global->cost),
                       100 * saved(plan.time_s, result.global->time_s));
  }
  return kExitOk;
}

}  // namespace zeus::cli
