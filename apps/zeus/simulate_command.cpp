#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <charconv>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <ostream>

#include "cli.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/sim/explain.h"
#include "zeus/sim/simulator.h"
#include "zeus/trace/power_trace.h"
#include "zeus/trace/train_trace.h"

namespace zeus::cli {
namespace {

uint64_t parse_seed(std::string_view text, std::string_view whole) {
  const auto v = parse_number<uint64_t>(text);
  if (!v) {
    throw ConfigError(
        fmt::format("--seeds '{}': '{}' is not a seed (a whole number >= 0); write "
                    "1..10, 1,2,3 or 7",
                    whole, text));
  }
  return *v;
}

std::vector<uint64_t> parse_seeds(const std::string& text) {
  std::vector<uint64_t> seeds;
  if (const size_t dots = text.find(".."); dots != std::string::npos) {
    const uint64_t first = parse_seed(std::string_view(text).substr(0, dots), text);
    const uint64_t last = parse_seed(std::string_view(text).substr(dots + 2), text);
    if (last < first || last - first >= 10'000) {
      throw ConfigError(
          fmt::format("--seeds '{}': the range must go up and hold at most 10000", text));
    }
    for (uint64_t s = first; s <= last; ++s) {
      seeds.push_back(s);
    }
    return seeds;
  }
  std::string_view rest = text;
  while (true) {
    const size_t comma = rest.find(',');
    seeds.push_back(parse_seed(rest.substr(0, comma), text));
    if (comma == std::string_view::npos) {
      return seeds;
    }
    rest.remove_prefix(comma + 1);
  }
}

struct Group {
  std::string gpu;
  std::string workload;
  int64_t b0 = 0;
  std::vector<sim::SimulationResult> runs;
};

double mean_of(const Group& g, double (sim::SimulationResult::*f)() const) {
  double sum = 0;
  for (const auto& r : g.runs) {
    sum += (r.*f)();
  }
  return sum / static_cast<double>(g.runs.size());
}

// The (batch size, limit) most seeds ended with; ties go to the smaller pair.
std::pair<int64_t, int64_t> most_common_final(const Group& g) {
  std::map<std::pair<int64_t, int64_t>, int> counts;
  for (const auto& r : g.runs) {
    ++counts[{r.final_batch_size, r.final_power_limit_w}];
  }
  return std::max_element(counts.begin(), counts.end(),
                          [](const auto& a, const auto& b) { return a.second < b.second; })
      ->first;
}

void print_table(std::ostream& out, const std::vector<Group>& groups, bool show_profiles,
                 const SimulateCommandOptions& o, std::string_view policy, size_t seeds) {
  out << fmt::format(
      "zeus simulate: policy {}, fidelity {}, eta {}, beta {}, {} seed(s) ({}); energy, cost and "
      "time vs Default (b0 at the maximum power limit), cumulative over all recurrences\n",
      policy, o.fidelity, o.eta, o.beta, seeds, o.seeds);
  out << fmt::format("{:<8} {:<13} {:>5} {:>6} {:>13} {:>11} {:>12} {:>14} {:>14} {:>14} {:>13}\n",
                     "gpu", "workload", "b0", "recur", "energy saved", "cost saved", "time change",
                     "last-10 saved", "final (b, W)", "oracle (b, W)", "oracle saved");
  for (const auto& g : groups) {
    const auto [final_bs, final_pl] = most_common_final(g);
    const auto& first = g.runs.front();
    const double oracle_saved = 1.0 - first.oracle.energy_j / first.baseline.energy_j;
    out << fmt::format(
        "{:<8} {:<13} {:>5} {:>6} {:>12.1f}% {:>10.1f}% {:>+11.1f}% {:>13.1f}% {:>14} {:>14} "
        "{:>12.1f}%\n",
        g.gpu, g.workload, g.b0, first.recurrences.size(),
        100 * mean_of(g, &sim::SimulationResult::energy_savings),
        100 * mean_of(g, &sim::SimulationResult::cost_savings),
        100 * mean_of(g, &sim::SimulationResult::time_change),
        100 * mean_of(g, &sim::SimulationResult::last10_energy_savings),
        fmt::format("({}, {})", final_bs, final_pl),
        fmt::format("({}, {})", first.oracle.batch_size, first.oracle.power_limit_w),
        100 * oracle_saved);
    if (show_profiles) {
      std::vector<std::string> parts;
      for (const auto& [bs, w] : first.jit_limits_w) {
        parts.push_back(fmt::format("{}:{}W", bs, w));
      }
      out << fmt::format("    JIT power limit per batch size: {}\n", fmt::join(parts, " "));
    }
  }
  double energy = 0;
  double cost = 0;
  for (const auto& g : groups) {
    energy += mean_of(g, &sim::SimulationResult::energy_savings);
    cost += mean_of(g, &sim::SimulationResult::cost_savings);
  }
  out << fmt::format("mean over {} jobs: energy saved {:.2f}%, cost saved {:.2f}%\n", groups.size(),
                     100 * energy / static_cast<double>(groups.size()),
                     100 * cost / static_cast<double>(groups.size()));
}

// Where each job's energy went against the oracle, mean over seeds, in percent of the Default's
// cumulative energy (so the gap is oracle saved - energy saved).
void print_explain(std::ostream& out, const std::vector<Group>& groups) {
  out << "\nwhere the energy went against the oracle (the best static (b, W) every recurrence), "
         "mean over seeds, in % of the Default's cumulative energy:\n";
  out << fmt::format("{:<8} {:<13} {:>7}", "gpu", "workload", "gap");
  for (const auto& part : sim::gap_parts()) {
    out << fmt::format(" {:>{}}", part.name, std::max<size_t>(part.name.size(), 8));
  }
  out << "\n";
  for (const auto& g : groups) {
    sim::EnergyGap mean;
    for (const auto& r : g.runs) {
      const sim::EnergyGap gap = sim::explain(r);
      for (const auto& part : sim::gap_parts()) {
        mean.*part.field +=
            100 * gap.*part.field / r.baseline_energy_j / static_cast<double>(g.runs.size());
      }
    }
    out << fmt::format("{:<8} {:<13} {:>6.2f}%", g.gpu, g.workload, mean.total_j());
    for (const auto& part : sim::gap_parts()) {
      out << fmt::format(" {:>{}.2f}%", mean.*part.field,
                         std::max<size_t>(part.name.size(), 8) - 1);
    }
    out << "\n";
  }
}

nlohmann::json explain_json(const sim::SimulationResult& r) {
  const sim::EnergyGap gap = sim::explain(r);
  return {{"gap_j", gap.total_j()},
          {"pruning_failed_j", gap.pruning_failed_j},
          {"pruning_worse_j", gap.pruning_worse_j},
          {"thompson_j", gap.thompson_j},
          {"profiling_j", gap.profiling_j},
          {"first_recurrence_j", gap.first_recurrence_j}};
}

nlohmann::json to_json(const sim::SimulationResult& r) {
  nlohmann::json log = nlohmann::json::array();
  for (const auto& rec : r.recurrences) {
    log.push_back({{"batch_size", rec.batch_size},
                   {"power_limit_w", rec.power_limit_w},
                   {"energy_j", rec.energy_j},
                   {"time_s", rec.time_s},
                   {"cost", rec.cost},
                   {"tries", rec.tries},
                   {"reached", rec.reached}});
  }
  nlohmann::json tries = nlohmann::json::array();
  for (const auto& t : r.tries) {
    nlohmann::json j{{"recurrence", t.recurrence},
                     {"batch_size", t.batch_size},
                     {"power_limit_w", t.power_limit_w},
                     {"stage", t.pruning ? "pruning" : "thompson"},
                     {"ran", t.ran},
                     {"epochs", t.epochs},
                     {"energy_j", t.energy_j},
                     {"time_s", t.time_s},
                     {"cost", t.cost},
                     {"reached", t.reached},
                     {"profiling_energy_j", t.profiling_energy_j}};
    if (t.epoch_cap) {
      j["epoch_cap"] = *t.epoch_cap;
    }
    tries.push_back(std::move(j));
  }
  nlohmann::json jit = nlohmann::json::object();
  for (const auto& [bs, w] : r.jit_limits_w) {
    jit[std::to_string(bs)] = w;
  }
  return {{"gpu", r.gpu},
          {"workload", r.workload},
          {"seed", r.seed},
          {"policy", optimize::to_string(r.policy)},
          {"recurrences", r.recurrences.size()},
          {"zeus_energy_j", r.zeus_energy_j},
          {"zeus_time_s", r.zeus_time_s},
          {"baseline_energy_j", r.baseline_energy_j},
          {"baseline_time_s", r.baseline_time_s},
          {"zeus_cost", r.zeus_cost},
          {"baseline_cost", r.baseline_cost},
          {"energy_savings", r.energy_savings()},
          {"cost_savings", r.cost_savings()},
          {"time_change", r.time_change()},
          {"last10_energy_savings", r.last10_energy_savings()},
          {"final_batch_size", r.final_batch_size},
          {"final_power_limit_w", r.final_power_limit_w},
          {"oracle_batch_size", r.oracle.batch_size},
          {"oracle_power_limit_w", r.oracle.power_limit_w},
          {"oracle_energy_j", r.oracle.energy_j},
          {"oracle_cost", r.oracle.cost},
          {"jit_power_limit_w", jit},
          {"explain", explain_json(r)},
          {"recurrence_log", log},
          {"tries", tries}};
}

}  // namespace

void for_each_traced_job(const SimulateCommandOptions& o,
                         const std::function<void(const sim::WorkloadModel&)>& each) {
  std::vector<std::string> gpus;
  if (o.gpu == "all") {
    for (const auto g : trace::trace_gpu_models()) {
      gpus.emplace_back(g);
    }
  } else {
    gpus.push_back(o.gpu);
  }
  std::vector<const sim::Job*> jobs;
  if (o.workload == "all") {
    for (const auto& job : trace::all_workloads()) {
      jobs.push_back(&job);
    }
  } else {
    jobs.push_back(&trace::find_workload(o.workload));
  }
  const std::filesystem::path dir =
      o.trace_dir.empty() ? trace::trace_dir() : std::filesystem::path(o.trace_dir);
  const trace::TrainTrace train = trace::TrainTrace::load(dir / "summary_train.csv");
  for (const auto& gpu : gpus) {
    if (std::find(trace::trace_gpu_models().begin(), trace::trace_gpu_models().end(), gpu) ==
        trace::trace_gpu_models().end()) {
      throw ConfigError(fmt::format("--gpu '{}': choose v100, a40, p100, rtx6000 or all", gpu));
    }
    const trace::PowerTrace power =
        trace::PowerTrace::load(dir / fmt::format("summary_power_{}.csv", gpu));
    for (const sim::Job* job : jobs) {
      each(sim::WorkloadModel(gpu, *job, power, train));
    }
  }
}

int run_simulate(const SimulateCommandOptions& o, std::ostream& out, std::ostream& err) {
  if (!o.carbon.empty() || !o.price.empty()) {
    return run_simulate_grid(o, out, err);
  }
  if (!o.dp.empty() || o.batch_size != 0) {
    return run_simulate_dp(o, out, err);
  }
  std::vector<Group> groups;
  std::vector<uint64_t> seeds;
  std::string policy;  // as the table header names it
  try {
    if (!(o.eta >= 0.0 && o.eta <= 1.0)) {
      throw ConfigError(fmt::format("--eta {} is outside [0, 1]", o.eta));
    }
    if (!(o.beta >= 1.0)) {
      throw ConfigError(fmt::format("--beta {} must be at least 1", o.beta));
    }
    if (o.recurrences == 0 || o.recurrences < -1) {
      throw ConfigError(fmt::format("--recurrences {} must be at least 1", o.recurrences));
    }
    seeds = parse_seeds(o.seeds);
    sim::SimulationOptions options;
    options.eta = o.eta;
    options.beta = o.beta;
    options.recurrences = std::max(o.recurrences, 0);
    options.selector = optimize::parse_selector(o.selector);
    const optimize::PolicyChoice choice = optimize::parse_policy_choice(o.policy, o.lean);
    options.policy = choice.policy;
    options.lean = choice.lean;
    policy = optimize::policy_label(choice);
    options.fidelity = sim::parse_fidelity(o.fidelity);

    for_each_traced_job(o, [&](const sim::WorkloadModel& model) {
      Group group{model.gpu(), std::string(model.job().dataset), model.default_batch_size(), {}};
      for (const uint64_t seed : seeds) {
        options.seed = seed;
        group.runs.push_back(sim::simulate(model, options));
      }
      groups.push_back(std::move(group));
    });
  } catch (const Error& e) {
    err << "zeus simulate: error: " << e.what() << "\n";
    return kExitUsage;
  }

  if (o.format == "table") {
    print_table(out, groups, o.show_profiles, o, policy, seeds.size());
    if (o.explain) {
      print_explain(out, groups);
    }
  } else if (o.format == "csv") {
    out << "gpu,workload,seed,policy,recurrences,zeus_energy_j,zeus_time_s,zeus_cost,"
           "baseline_energy_j,baseline_time_s,baseline_cost,energy_savings,cost_savings,"
           "time_change,last10_energy_savings,final_batch_size,final_power_limit_w,"
           "oracle_batch_size,oracle_power_limit_w,oracle_energy_j,default_batch_size,"
           "gap_pruning_failed_j,gap_pruning_worse_j,gap_thompson_j,gap_profiling_j,"
           "gap_first_recurrence_j\n";
    for (const auto& g : groups) {
      for (const auto& r : g.runs) {
        const sim::EnergyGap gap = sim::explain(r);
        out << fmt::format(
            "{},{},{},{},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g},{:.6f},{:.6f},{:.6f},{:.6f},"
            "{},{},{},{},{:.9g},{},{:.9g},{:.9g},{:.9g},{:.9g},{:.9g}\n",
            r.gpu, r.workload, r.seed, optimize::to_string(r.policy), r.recurrences.size(),
            r.zeus_energy_j, r.zeus_time_s, r.zeus_cost, r.baseline_energy_j, r.baseline_time_s,
            r.baseline_cost, r.energy_savings(), r.cost_savings(), r.time_change(),
            r.last10_energy_savings(), r.final_batch_size, r.final_power_limit_w,
            r.oracle.batch_size, r.oracle.power_limit_w, r.oracle.energy_j, r.baseline.batch_size,
            gap.pruning_failed_j, gap.pruning_worse_j, gap.thompson_j, gap.profiling_j,
            gap.first_recurrence_j);
      }
    }
  } else {
    nlohmann::json all = nlohmann::json::array();
    for (const auto& g : groups) {
      for (const auto& r : g.runs) {
        all.push_back(to_json(r));
      }
    }
    out << all.dump(2) << "\n";
  }
  return kExitOk;
}

}  // namespace zeus::cli
