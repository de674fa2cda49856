#include "zeus/report/report.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>

#include "zeus/common/atomic_file.h"
#include "zeus/common/csv.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/common/power.h"
#include "zeus/common/units.h"
#include "zeus/contract/run_files.h"
#include "zeus/optimize/cost.h"
#include "zeus/report/svg_chart.h"

namespace zeus::report {

namespace fs = std::filesystem;
using nlohmann::json;

namespace {

const optimize::PowerProfile* profile_for(const RunData& run, int64_t bs) {
  for (const auto& [path, p] : run.profiles) {
    if (p.global_batch_size == bs) {
      return &p;
    }
  }
  return nullptr;
}

// Per limit: time per iteration (s), energy per iteration (J), cost per iteration.
struct LimitRow {
  int64_t limit_mw;
  double time_s;
  double energy_j;
  double cost;
};

std::vector<LimitRow> limit_rows(const optimize::PowerProfile& p, double eta, double max_power_w) {
  std::vector<LimitRow> rows;
  std::optional<optimize::CostModel> cost;
  if (max_power_w > 0) {
    cost.emplace(eta, max_power_w);
  }
  for (const auto& [mw, m] : p.train) {
    rows.push_back({mw, 1.0 / m.throughput_ips, m.power_w / m.throughput_ips,
                    cost ? cost->cost_per_iteration(m.power_w, m.throughput_ips) : 0.0});
  }
  return rows;
}

std::string summary_html(const contract::TrainResult& r) {
  std::string h = "<table class=\"kv\">";
  auto row = [&](std::string_view k, const std::string& v) {
    h += fmt::format("<tr><th>{}</th><td>{}</td></tr>", k, esc(v));
  };
  row("result",
      fmt::format("{} after {} epoch(s) ({})", r.reached ? "target reached" : "target not reached",
                  r.num_epochs, contract::to_string(r.stop_reason)));
  row("energy", fmt::format("{:.1f} J ({:.3f} Wh)", r.energy_j, r.energy_j / 3600));
  row("time", fmt::format("{:.1f} s", r.time_s));
  row("cost", fmt::format("{:.1f} (eta {}, MAXPOWER {:.0f} W)", r.cost, r.eta, r.max_power_w));
  row("ranks", fmt::format("{} on {} node(s), device {}", r.world_size, r.nodes, r.device));
  if (r.measure_only) {
    row("mode", fmt::format("measure-only: no power limit was set; the GPUs ran at their own "
                            "limit ({} W of max {} W), nothing was profiled",
                            mw_to_w(r.epochs.empty() ? 0 : r.epochs.back().power_limit_mw),
                            mw_to_w(r.max_power_limit_mw)));
  }
  if (r.optimal_power_limit_mw) {
    row("power limit",
        fmt::format("optimal {} W of max {} W{}{}", mw_to_w(*r.optimal_power_limit_mw),
                    mw_to_w(r.max_power_limit_mw),
                    r.observer_mode ? " (observer mode: ran at max)" : "",
                    r.profiled ? "" : " (from a saved profile)"));
    row(r.observer_mode ? "would have saved" : "saved (estimate)",
        fmt::format("{:.1f} J and {:.1f} s vs the maximum limit", r.estimated_energy_saving_j,
                    r.estimated_time_saving_s));
  }
  if (r.power_limit_plan != "global" && !r.power_limits_mw.empty()) {
    const bool set = r.power_limit_plan == "per_gpu";
    std::vector<double> w;
    for (int64_t mw : r.power_limits_mw) {
      w.push_back(mw_to_w(mw));
    }
    row("per-GPU limits",
        fmt::format("{} W by rank (one limit would be {} W)", fmt::join(w, ", "),
                    r.optimal_power_limit_mw ? fmt::format("{}", mw_to_w(*r.optimal_power_limit_mw))
                                             : std::string("-")));
    row(set ? "per-GPU plan saved (estimate)" : "per-GPU plan would have saved (measure-only)",
        fmt::format("{:.1f} J and {:.1f} s vs {}", r.estimated_plan_energy_saving_j,
                    r.estimated_plan_time_saving_s,
                    set ? "the one limit" : "the limit they ran at"));
    for (const auto& p : r.replans) {
      row(fmt::format("re-planned (epoch {}, step {})", p.epoch + 1, p.step), p.reason);
    }
  }
  if (r.grid) {
    const contract::GridSummary& g = *r.grid;
    row(g.signal == "carbon_intensity" ? "carbon intensity" : "electricity price",
        fmt::format("{} (Zeus's choice at {}); {:.4g} {} over the epochs{}", g.source,
                    g.signal_max > 0 ? fmt::format("{:g}", g.signal_max)
                                     : std::string("the grid's mean over the last day"),
                    g.amount, g.unit,
                    g.provider_failures > 0
                        ? fmt::format("; the provider failed {} time(s)", g.provider_failures)
                        : ""));
    if (g.followed) {
      row("following it saved (estimate)",
          fmt::format("{:.4g} {} and {:.1f} s vs Zeus's fixed limit", g.estimated_saving, g.unit,
                      g.estimated_time_saving_s));
      for (const auto& c : g.choices) {
        row(fmt::format("limit chosen (epoch {}, step {})", c.epoch + 1, c.step),
            fmt::format("{} W at {:g}: {}", mw_to_w(c.power_limit_mw), c.signal, c.reason));
      }
    }
  }
  return h + "</table>\n";
}

// An epoch's gCO2eq or $ under the grid's signal, or "-".
std::string grid_cell(const contract::EpochRecord& e) {
  return e.grid_amount ? fmt::format("{:.4g}", *e.grid_amount) : "-";
}

std::string epochs_html(const contract::TrainResult& r) {
  std::string h =
      "<table><tr><th>epoch</th><th>train iters</th><th>train s</th><th>train J</th><th>eval "
      "iters</th><th>eval s</th><th>eval J</th><th>limit W</th><th>metric</th>" +
      (r.grid ? fmt::format("<th>{}</th>", esc(r.grid->unit)) : std::string()) + "</tr>";
  for (const auto& e : r.epochs) {
    h += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{:.2f}</td><td>{:.1f}</td><td>{}</td><td>{:.2f}</td><td>{:."
        "1f}</td><td>{}</td><td>{}</td>{}</tr>",
        e.epoch + 1, e.train_iterations, e.train_time_s, e.train_energy_j, e.eval_iterations,
        e.eval_time_s, e.eval_energy_j, mw_to_w(e.power_limit_mw),
        e.metric ? fmt::format("{:.4f}", *e.metric) : "-",
        r.grid ? fmt::format("<td>{}</td>", grid_cell(e)) : std::string());
  }
  return h + "</table>\n";
}

std::string timeline_html(const RunData& run, const contract::TrainResult& r) {
  Chart c;
  c.title = fmt::format("Power per GPU, global batch size {} (profiling windows shaded)",
                        r.global_batch_size);
  c.x_label = "time since the first sample (s)";
  c.y_label = "power (W)";
  std::map<int, Series> by_gpu;
  int64_t t0 = INT64_MAX;
  for (const auto& log : run.power_logs) {
    if (log.batch_size == r.global_batch_size && !log.samples.empty()) {
      t0 = std::min(t0, log.samples.front().first);
    }
  }
  if (t0 == INT64_MAX) {
    return "<p><em>no power logs for this batch size</em></p>";
  }
  for (const auto& log : run.power_logs) {
    if (log.batch_size != r.global_batch_size) {
      continue;
    }
    Series& s = by_gpu[log.gpu];
    s.label = fmt::format("gpu{}", log.gpu);
    // At most ~1500 points per log keeps the page light.
    const size_t stride = std::max<size_t>(1, log.samples.size() / 1500);
    for (size_t i = 0; i < log.samples.size(); i += stride) {
      s.points.emplace_back(static_cast<double>(log.samples[i].first - t0) / 1e9,
                            log.samples[i].second);
    }
  }
  for (auto& [gpu, s] : by_gpu) {
    std::sort(s.points.begin(), s.points.end());
    c.series.push_back(std::move(s));
  }
  for (const auto& w : r.windows) {
    c.shaded.emplace_back(static_cast<double>(w.begin_unix_ns - t0) / 1e9,
                          static_cast<double>(w.end_unix_ns - t0) / 1e9);
  }
  return render(c);
}

std::string profile_html(const optimize::PowerProfile& p, const contract::TrainResult* r) {
  const double eta = r ? r->eta : 0.5;
  const double maxp = r ? r->max_power_w : 0;
  const auto rows = limit_rows(p, eta, maxp);
  std::string h;
  auto chart = [&](std::string title, std::string unit, auto value) {
    Chart c;
    c.title = std::move(title);
    c.x_label = "power limit (W)";
    c.y_label = std::move(unit);
    c.y_from_zero = false;
    Series s{"per iteration", {}, true};
    for (const auto& row : rows) {
      s.points.emplace_back(mw_to_w(row.limit_mw), value(row));
      if (row.limit_mw == p.optimal_power_limit_mw) {
        c.highlight = std::pair(mw_to_w(row.limit_mw), value(row));
        c.highlight_label = fmt::format("chosen: {} W", mw_to_w(row.limit_mw));
      }
    }
    c.series.push_back(std::move(s));
    h += render(c, 360, 220);
  };
  if (maxp > 0) {
    chart("Cost per iteration", "cost", [](const LimitRow& x) { return x.cost; });
  }
  chart("Energy per iteration", "J (all GPUs)", [](const LimitRow& x) { return x.energy_j; });
  chart("Time per iteration", "s", [](const LimitRow& x) { return x.time_s; });
  h += "<table><tr><th>limit W</th><th>iterations/s</th><th>power W</th><th>J/iteration</th>"
       "<th>cost/iteration</th></tr>";
  for (const auto& row : rows) {
    const auto& m = p.train.at(row.limit_mw);
    h += fmt::format(
        "<tr{}><td>{}</td><td>{:.3f}</td><td>{:.1f}</td><td>{:.2f}</td><td>{}</td></tr>",
        row.limit_mw == p.optimal_power_limit_mw ? " class=\"chosen\"" : "", mw_to_w(row.limit_mw),
        m.throughput_ips, m.power_w, row.energy_j,
        maxp > 0 ? fmt::format("{:.2f}", row.cost) : "-");
  }
  return h + "</table>\n";
}

std::string tune_html(const RunData& run) {
  std::string h = "<h2>zeus tune: batch size and cost per recurrence</h2>\n";
  Chart c;
  c.title = "Cost of each try (reached: filled line; labels: batch size)";
  c.x_label = "recurrence";
  c.y_label = "cost";
  std::map<int64_t, Series> by_bs;
  for (const auto& t : run.tune_tries) {
    Series& s = by_bs[t.batch_size];
    s.label = fmt::format("bs {}", t.batch_size);
    s.markers = true;
    s.points.emplace_back(t.recurrence + 1, t.cost);
  }
  for (auto& [bs, s] : by_bs) {
    c.series.push_back(std::move(s));
  }
  h += render(c);
  h += "<table><tr><th>recurrence</th><th>try</th><th>batch size</th><th>lr</th><th>cost</th><th>"
       "energy J</th><th>time s</th><th>epochs</th><th>reached</th><th>threshold</th></tr>";
  for (const auto& t : run.tune_tries) {
    h += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{:g}</td><td>{:.1f}</td><td>{:.1f}</td><td>{:."
        "1f}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
        t.recurrence + 1, t.attempt + 1, t.batch_size, t.lr, t.cost, t.energy_j, t.time_s,
        t.num_epochs, t.reached ? "yes" : "no",
        std::isfinite(t.cost_threshold) ? fmt::format("{:.1f}", t.cost_threshold) : "-");
  }
  return h + "</table>\n";
}

}  // namespace

RunData load_run(const fs::path& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw ConfigError(
        fmt::format("'{}' is not a directory; give the log dir of a run (default "
                    "zeus_log/, or ZEUS_LOG_DIR / --log-dir)",
                    dir.string()));
  }
  RunData run;
  run.dir = dir;
  const contract::RunDirListing files = contract::list_run_dir(dir);
  for (const auto& [path, name] : files.train_results) {
    run.results.emplace_back(path, contract::load_train_result(path));
  }
  for (const auto& [path, bs] : files.power_profiles) {
    if (auto p = contract::load_power_profile(path)) {
      run.profiles.emplace_back(path, *p);
    }
  }
  for (const auto& [path, name] : files.power_logs) {
    run.power_logs.push_back(
        {path, name.global_batch_size, name.epoch, name.gpu, contract::read_power_log(path)});
  }
  if (files.tune_tries) {
    run.tune_tries = tune::read_tries(*files.tune_tries);
  }
  if (run.results.empty() && run.profiles.empty() && run.tune_tries.empty()) {
    throw ConfigError(fmt::format(
        "'{}' holds no train results (*.train.json), power profiles (bs*.power.json) or tune "
        "history ({}); is it the log dir of a zeus::DataLoader or zeus tune run?",
        dir.string(), contract::kTuneTriesName));
  }
  return run;
}

std::string to_html(const RunData& run) {
  std::string h = fmt::format(
      "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>zeus report: {}</title>\n"
      "<style>body{{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}}"
      "table{{border-collapse:collapse;margin:0.5em 0 1.5em}}td,th{{border:1px solid #ccc;"
      "padding:2px 8px;text-align:right}}table.kv th{{text-align:left}}tr.chosen{{background:"
      "#fdd}}h2{{border-bottom:1px solid #ccc}}svg{{margin:4px}}</style></head><body>\n"
      "<h1>zeus report</h1><p>{}</p>\n",
      esc(run.dir.string()), esc(run.dir.string()));
  if (!run.tune_tries.empty()) {
    h += tune_html(run);
  }
  // In a tune directory every try has a result; show the details of the last few.
  const size_t first = run.results.size() > 4 ? run.results.size() - 4 : 0;
  if (first > 0) {
    h += fmt::format("<p>{} train results; the last 4 follow.</p>\n", run.results.size());
  }
  for (size_t i = first; i < run.results.size(); ++i) {
    const auto& [path, r] = run.results[i];
    h += fmt::format("<h2>{}</h2>\n", esc(path.filename().string()));
    h += summary_html(r);
    h += timeline_html(run, r);
    if (const auto* p = profile_for(run, r.global_batch_size)) {
      h += "<h3>Power limits profiled</h3>\n" + profile_html(*p, &r);
    }
    h += "<h3>Epochs</h3>\n" + epochs_html(r);
  }
  if (run.results.empty()) {
    for (const auto& [path, p] : run.profiles) {
      h += fmt::format("<h2>{}</h2>\n", esc(path.filename().string())) + profile_html(p, nullptr);
    }
  }
  return h + "</body></html>\n";
}

std::string to_markdown(const RunData& run) {
  std::string md = fmt::format("# zeus report: {}\n\n", run.dir.string());
  for (const auto& [path, r] : run.results) {
    md += fmt::format("## {}\n\n{}\n\n", path.filename().string(), contract::summary_line(r));
    md += fmt::format(
        "| epoch | train s | train J | eval s | eval J | limit W | metric |{}\n"
        "|---|---|---|---|---|---|---|{}\n",
        r.grid ? fmt::format(" {} |", r.grid->unit) : "", r.grid ? "---|" : "");
    for (const auto& e : r.epochs) {
      md +=
          fmt::format("| {} | {:.2f} | {:.1f} | {:.2f} | {:.1f} | {} | {} |{}\n", e.epoch + 1,
                      e.train_time_s, e.train_energy_j, e.eval_time_s, e.eval_energy_j,
                      mw_to_w(e.power_limit_mw), e.metric ? fmt::format("{:.4f}", *e.metric) : "-",
                      r.grid ? fmt::format(" {} |", grid_cell(e)) : "");
    }
    if (const auto* p = profile_for(run, r.global_batch_size)) {
      md +=
          "\n| limit W | iterations/s | power W | J/iteration | cost/iteration |\n"
          "|---|---|---|---|---|\n";
      for (const auto& row : limit_rows(*p, r.eta, r.max_power_w)) {
        const auto& m = p->train.at(row.limit_mw);
        md += fmt::format("| {}{} | {:.3f} | {:.1f} | {:.2f} | {:.2f} |\n", mw_to_w(row.limit_mw),
                          row.limit_mw == p->optimal_power_limit_mw ? " (chosen)" : "",
                          m.throughput_ips, m.power_w, row.energy_j, row.cost);
      }
    }
    md += "\n";
  }
  if (!run.tune_tries.empty()) {
    md +=
        "## zeus tune\n\n| recurrence | try | batch size | cost | energy J | time s | reached |\n"
        "|---|---|---|---|---|---|---|\n";
    for (const auto& t : run.tune_tries) {
      md += fmt::format("| {} | {} | {} | {:.1f} | {:.1f} | {:.1f} | {} |\n", t.recurrence + 1,
                        t.attempt + 1, t.batch_size, t.cost, t.energy_j, t.time_s,
                        t.reached ? "yes" : "no");
    }
  }
  return md;
}

std::string to_json(const RunData& run) {
  json j;
  j["dir"] = run.dir.string();
  j["results"] = json::array();
  for (const auto& [path, r] : run.results) {
    json one = json::parse(contract::to_json(r));
    one["file"] = path.filename().string();
    j["results"].push_back(std::move(one));
  }
  j["profiles"] = json::array();
  for (const auto& [path, p] : run.profiles) {
    json one = json::parse(optimize::to_json(p));
    one["file"] = path.filename().string();
    j["profiles"].push_back(std::move(one));
  }
  j["power_logs"] = json::array();
  for (const auto& log : run.power_logs) {
    double energy_j = 0;
    for (size_t i = 1; i < log.samples.size(); ++i) {
      energy_j += (log.samples[i].second + log.samples[i - 1].second) / 2 *
                  static_cast<double>(log.samples[i].first - log.samples[i - 1].first) / 1e9;
    }
    j["power_logs"].push_back({{"file", log.path.filename().string()},
                               {"batch_size", log.batch_size},
                               {"epoch", log.epoch},
                               {"gpu", log.gpu},
                               {"samples", log.samples.size()},
                               {"energy", energy_j}});
  }
  j["tune_tries"] = json::array();
  for (const auto& t : run.tune_tries) {
    j["tune_tries"].push_back(json::parse(tune::to_json_line(t)));
  }
  return j.dump(2) + "\n";
}

}  // namespace zeus::report
