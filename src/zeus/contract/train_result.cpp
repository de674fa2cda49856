#include "zeus/contract/train_result.h"

#include <fmt/format.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"
#include "zeus/common/json.h"
#include "zeus/common/power.h"

namespace zeus::contract {

using nlohmann::json;

std::string_view to_string(StopReason reason) {
  switch (reason) {
    case StopReason::kTargetReached:
      return "target_reached";
    case StopReason::kMaxEpochs:
      return "max_epochs";
    case StopReason::kCostThreshold:
      return "cost_threshold";
  }
  return "unknown";
}

namespace {

// JSON has no infinity: an unbounded threshold is written as null.
json finite_or_null(double v) {
  return std::isfinite(v) ? json(v) : json(nullptr);
}

// A limit in W as Zeus writes it: a whole number when it is one (so Zeus's readers keep
// working), else the exact decimal (a GPU may take 187.5 W).
json watts(int64_t mw) {
  return mw % 1000 == 0 ? json(whole_w(mw)) : json(mw_to_w(mw));
}

int64_t mw_from_watts(const json& j, std::string_view what) {
  if (!j.is_number() || !(j.get<double>() >= 0) || j.get<double>() > 1e6) {
    throw ConfigError(fmt::format("{} is {}, not a power limit in W", what, j.dump()));
  }
  return w_to_mw(j.get<double>());
}

}  // namespace

std::string to_json(const TrainResult& r) {
  json j;
  j["energy"] = r.energy_j;
  j["time"] = r.time_s;
  j["cost"] = r.cost;
  j["num_epochs"] = r.num_epochs;
  j["reached"] = r.reached;
  j["job_id"] = r.job_id;
  j["global_batch_size"] = r.global_batch_size;
  j["world_size"] = r.world_size;
  j["nodes"] = r.nodes;
  j["device"] = r.device;
  j["eta"] = r.eta;
  j["max_power"] = r.max_power_w;
  j["cost_threshold"] = finite_or_null(r.cost_threshold);
  j["target_metric"] = r.target_metric;
  j["stop_reason"] = to_string(r.stop_reason);
  j["observer_mode"] = r.observer_mode;
  j["measure_only"] = r.measure_only;
  j["profiled"] = r.profiled;
  j["optimal_pl"] = r.optimal_power_limit_mw ? watts(*r.optimal_power_limit_mw) : json();
  j["max_pl"] = watts(r.max_power_limit_mw);
  j["estimated_energy_saving"] = r.estimated_energy_saving_j;
  j["estimated_time_saving"] = r.estimated_time_saving_s;
  json epochs = json::array();
  for (const auto& e : r.epochs) {
    epochs.push_back({{"epoch", e.epoch},
                      {"train_iterations", e.train_iterations},
                      {"eval_iterations", e.eval_iterations},
                      {"train_time", e.train_time_s},
                      {"eval_time", e.eval_time_s},
                      {"train_energy", e.train_energy_j},
                      {"eval_energy", e.eval_energy_j},
                      {"metric", e.metric ? json(*e.metric) : json()},
                      {"power_limit", watts(e.power_limit_mw)}});
    if (e.grid_amount) {
      epochs.back()["grid_amount"] = *e.grid_amount;
    }
  }
  j["epochs"] = std::move(epochs);
  json windows = json::array();
  for (const auto& w : r.windows) {
    windows.push_back({{"epoch", w.epoch},
                       {"power_limit", watts(w.power_limit_mw)},
                       {"begin_unix_ns", w.begin_unix_ns},
                       {"end_unix_ns", w.end_unix_ns}});
  }
  j["profile_windows"] = std::move(windows);
  j["power_limit_plan"] = r.power_limit_plan;
  json limits = json::array();
  for (int64_t mw : r.power_limits_mw) {
    limits.push_back(watts(mw));
  }
  j["power_limits_w"] = std::move(limits);
  j["estimated_plan_energy_saving"] = r.estimated_plan_energy_saving_j;
  j["estimated_plan_time_saving"] = r.estimated_plan_time_saving_s;
  json replans = json::array();
  for (const auto& p : r.replans) {
    json plan = json::array();
    for (int64_t mw : p.power_limits_mw) {
      plan.push_back(watts(mw));
    }
    replans.push_back(
        {{"epoch", p.epoch}, {"step", p.step}, {"reason", p.reason}, {"power_limits_w", plan}});
  }
  j["replans"] = std::move(replans);
  if (r.grid) {
    const GridSummary& g = *r.grid;
    json choices = json::array();
    for (const auto& c : g.choices) {
      choices.push_back({{"epoch", c.epoch},
                         {"step", c.step},
                         {"signal", c.signal},
                         {"power_limit", watts(c.power_limit_mw)},
                         {"reason", c.reason},
                         {"reference", c.reference}});
    }
    j["grid"] = {{"signal", g.signal},
                 {"unit", g.unit},
                 {"source", g.source},
                 {"signal_max", g.signal_max > 0 ? json(g.signal_max) : json("grid")},
                 {"amount", g.amount},
                 {"estimated_saving", g.estimated_saving},
                 {"estimated_time_saving", g.estimated_time_saving_s},
                 {"provider_failures", g.provider_failures},
                 {"followed", g.followed},
                 {"choices", std::move(choices)}};
  }
  return j.dump(2) + "\n";
}

TrainResult train_result_from_json(std::string_view text, std::string_view source) {
  try {
    const json j = json::parse(text);
    if (!j.is_object()) {
      throw ConfigError("not a JSON object");
    }
    auto number = [&](const char* key) -> double {
      if (!j.contains(key) || !j[key].is_number()) {
        throw ConfigError(fmt::format("'{}' is missing or not a number", key));
      }
      return j[key].get<double>();
    };
    TrainResult r;
    r.energy_j = number("energy");
    r.time_s = number("time");
    r.cost = number("cost");
    r.num_epochs = static_cast<int>(json_int(j.value("num_epochs", json(0)), "num_epochs"));
    if (!j.contains("reached") || !j["reached"].is_boolean()) {
      throw ConfigError("'reached' is missing or not true/false");
    }
    r.reached = j["reached"].get<bool>();
    // zeus-cpp's optional additions.
    r.job_id = j.value("job_id", std::string());
    r.global_batch_size = json_int(j.value("global_batch_size", json(0)), "global_batch_size");
    r.world_size = static_cast<int>(json_int(j.value("world_size", json(1)), "world_size"));
    r.nodes = static_cast<int>(json_int(j.value("nodes", json(1)), "nodes"));
    r.device = j.value("device", std::string());
    r.eta = j.value("eta", 0.0);
    r.max_power_w = j.value("max_power", 0.0);
    r.cost_threshold = j.contains("cost_threshold") && j["cost_threshold"].is_number()
                           ? j["cost_threshold"].get<double>()
                           : std::numeric_limits<double>::infinity();
    r.target_metric = j.value("target_metric", 0.0);
    const std::string reason = j.value("stop_reason", std::string("max_epochs"));
    r.stop_reason = reason == "target_reached"   ? StopReason::kTargetReached
                    : reason == "cost_threshold" ? StopReason::kCostThreshold
                                                 : StopReason::kMaxEpochs;
    r.observer_mode = j.value("observer_mode", false);
    r.measure_only = j.value("measure_only", false);
    r.profiled = j.value("profiled", false);
    if (j.contains("optimal_pl") && !j["optimal_pl"].is_null()) {
      r.optimal_power_limit_mw = mw_from_watts(j["optimal_pl"], "optimal_pl");
    }
    r.max_power_limit_mw = mw_from_watts(j.value("max_pl", json(0)), "max_pl");
    r.estimated_energy_saving_j = j.value("estimated_energy_saving", 0.0);
    r.estimated_time_saving_s = j.value("estimated_time_saving", 0.0);
    for (const auto& e : j.value("epochs", json::array())) {
      EpochRecord rec;
      rec.epoch = static_cast<int>(json_int(e.at("epoch"), "epochs[].epoch"));
      rec.train_iterations = json_int(e.value("train_iterations", json(0)), "train_iterations");
      rec.eval_iterations = json_int(e.value("eval_iterations", json(0)), "eval_iterations");
      rec.train_time_s = e.value("train_time", 0.0);
      rec.eval_time_s = e.value("eval_time", 0.0);
      rec.train_energy_j = e.value("train_energy", 0.0);
      rec.eval_energy_j = e.value("eval_energy", 0.0);
      if (e.contains("metric") && e["metric"].is_number()) {
        rec.metric = e["metric"].get<double>();
      }
      rec.power_limit_mw = mw_from_watts(e.value("power_limit", json(0)), "power_limit");
      if (e.contains("grid_amount") && e["grid_amount"].is_number()) {
        rec.grid_amount = e["grid_amount"].get<double>();
      }
      r.epochs.push_back(rec);
    }
    for (const auto& w : j.value("profile_windows", json::array())) {
      r.windows.push_back({static_cast<int>(json_int(w.at("epoch"), "epoch")),
                           mw_from_watts(w.at("power_limit"), "power_limit"),
                           json_int(w.at("begin_unix_ns"), "begin_unix_ns"),
                           json_int(w.at("end_unix_ns"), "end_unix_ns")});
    }
    r.power_limit_plan = j.value("power_limit_plan", std::string("global"));
    for (const auto& w : j.value("power_limits_w", json::array())) {
      r.power_limits_mw.push_back(mw_from_watts(w, "power_limits_w"));
    }
    r.estimated_plan_energy_saving_j = j.value("estimated_plan_energy_saving", 0.0);
    r.estimated_plan_time_saving_s = j.value("estimated_plan_time_saving", 0.0);
    for (const auto& p : j.value("replans", json::array())) {
      ReplanRecord rec;
      rec.epoch = static_cast<int>(json_int(p.at("epoch"), "replans[].epoch"));
      rec.step = json_int(p.at("step"), "replans[].step");
      rec.reason = p.value("reason", std::string());
      for (const auto& w : p.value("power_limits_w", json::array())) {
        rec.power_limits_mw.push_back(mw_from_watts(w, "replans[].power_limits_w"));
      }
      r.replans.push_back(std::move(rec));
    }
    if (j.contains("grid") && j["grid"].is_object()) {
      const json& g = j["grid"];
      GridSummary s;
      s.signal = g.value("signal", std::string());
      s.unit = g.value("unit", std::string());
      s.source = g.value("source", std::string());
      s.signal_max = g.contains("signal_max") && g["signal_max"].is_number()
                         ? g["signal_max"].get<double>()
                         : 0.0;  // "grid": the grid's own
      s.amount = g.value("amount", 0.0);
      s.estimated_saving = g.value("estimated_saving", 0.0);
      s.estimated_time_saving_s = g.value("estimated_time_saving", 0.0);
      s.provider_failures =
          json_int(g.value("provider_failures", json(0)), "grid.provider_failures");
      s.followed = g.value("followed", false);
      for (const auto& c : g.value("choices", json::array())) {
        s.choices.push_back({static_cast<int>(json_int(c.at("epoch"), "grid.choices[].epoch")),
                             json_int(c.at("step"), "grid.choices[].step"), c.value("signal", 0.0),
                             mw_from_watts(c.at("power_limit"), "grid.choices[].power_limit"),
                             c.value("reason", std::string()), c.value("reference", 0.0)});
      }
      r.grid = std::move(s);
    }
    return r;
  } catch (const json::exception& e) {
    throw ConfigError(fmt::format("train result {} is corrupt: {}", source, e.what()));
  } catch (const ConfigError& e) {
    throw ConfigError(fmt::format("train result {} is invalid: {}", source, e.what()));
  }
}

void save_train_result(const std::filesystem::path& path, const TrainResult& result) {
  write_file_atomic(path, to_json(result));
}

TrainResult load_train_result(const std::filesystem::path& path) {
  return train_result_from_json(read_file(path), path.string());
}

std::string summary_line(const TrainResult& r) {
  std::string line = fmt::format(
      "{} epoch(s), target {} ({}); energy {:.1f} J ({:.3f} Wh), time {:.1f} s, cost {:.1f}",
      r.num_epochs, r.reached ? "reached" : "not reached", to_string(r.stop_reason), r.energy_j,
      r.energy_j / 3600.0, r.time_s, r.cost);
  if (r.measure_only) {
    line += fmt::format("; measure-only: no limit set, the GPUs ran at {} W (max {} W)",
                        mw_to_w(r.epochs.empty() ? 0 : r.epochs.back().power_limit_mw),
                        mw_to_w(r.max_power_limit_mw));
  }
  if (r.optimal_power_limit_mw) {
    line += fmt::format(", optimal limit {} W (max {} W)", mw_to_w(*r.optimal_power_limit_mw),
                        mw_to_w(r.max_power_limit_mw));
    const double at_max = r.observer_mode ? r.energy_j : r.energy_j + r.estimated_energy_saving_j;
    const double pct = at_max > 0 ? 100.0 * r.estimated_energy_saving_j / at_max : 0.0;
    line += fmt::format("; {} {:.1f} J ({:.1f}%) and {} {:.1f} s vs the maximum limit",
                        r.observer_mode ? "observer mode: would have saved" : "saved",
                        r.estimated_energy_saving_j, pct,
                        r.estimated_time_saving_s >= 0 ? "gained" : "lost",
                        std::abs(r.estimated_time_saving_s));
  }
  if (r.power_limit_plan != "global" && !r.power_limits_mw.empty()) {
    std::string limits;
    for (int64_t mw : r.power_limits_mw) {
      limits += fmt::format("{}{}", limits.empty() ? "" : ",", mw_to_w(mw));
    }
    const bool set = r.power_limit_plan == "per_gpu";
    line += fmt::format("; per-GPU limits [{}] W {} {:.1f} J and {} {:.1f} s vs {}{}", limits,
                        set ? "saved" : "would have saved", r.estimated_plan_energy_saving_j,
                        r.estimated_plan_time_saving_s >= 0 ? "gained" : "lost",
                        std::abs(r.estimated_plan_time_saving_s),
                        set ? "one limit" : "the limit they ran at",
                        r.replans.empty() ? "" : fmt::format(" ({} re-plan(s))", r.replans.size()));
  }
  if (r.grid) {
    const GridSummary& g = *r.grid;
    line += fmt::format("; {:.4g} {} over the epochs", g.amount, g.unit);
    if (g.followed) {
      line += fmt::format(
          " ({} limit choice(s) following the {}; {} {:.4g} {} and {} {:.1f} s vs "
          "Zeus's fixed limit)",
          g.choices.size(),
          g.signal == "carbon_intensity" ? "carbon intensity" : "electricity price",
          g.estimated_saving >= 0 ? "saved" : "spent", std::abs(g.estimated_saving), g.unit,
          g.estimated_time_saving_s >= 0 ? "gained" : "lost", std::abs(g.estimated_time_saving_s));
    }
  }
  return line;
}

}  // namespace zeus::contract
