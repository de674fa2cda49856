// The grid's signal and the rule's knob, for zeus_cpp.monitor.carbon/price and
// CarbonAwarePowerLimitOptimizer: the same trace reader and the same knob as zeus::DataLoader's
// jobs and `zeus simulate --carbon` (the optimizer chooses with ZeusCost at that knob).
#include <pybind11/stl.h>

#include <chrono>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "bindings.h"
#include "zeus/common/errors.h"
#include "zeus/grid/signal_trace.h"
#include "zeus/optimize/grid_rule.h"

namespace py = pybind11;

namespace zeus::python {
namespace {

double to_unix_s(grid::Clock::time_point t) {
  return std::chrono::duration<double>(t.time_since_epoch()).count();
}

grid::Clock::time_point from_unix_s(double s) {
  return grid::Clock::time_point{
      std::chrono::duration_cast<grid::Clock::duration>(std::chrono::duration<double>(s))};
}

grid::SignalKind parse_kind(const std::string& kind) {
  if (kind == "carbon")
    return grid::SignalKind::kCarbonIntensity;
  if (kind == "price")
    return grid::SignalKind::kElectricityPrice;
  throw ConfigError("signal kind '" + kind + "': choose carbon or price");
}

}  // namespace

void bind_grid(py::module_& m) {
  py::class_<grid::SignalTrace>(
      m, "SignalTrace",
      "A carbon-intensity or price trace (CSV datetime,carbonIntensity / datetime,price_per_kwh, "
      "or ElectricityMaps' JSON); times as Unix seconds.")
      .def_static(
          "load",
          [](const std::string& path, const std::string& kind) {
            return grid::SignalTrace::load(path, parse_kind(kind));
          },
          py::arg("path"), py::arg("kind") = "carbon")
      .def_static(
          "parse",
          [](const std::string& text, const std::string& source, const std::string& kind) {
            return grid::SignalTrace::parse(text, source, parse_kind(kind));
          },
          py::arg("text"), py::arg("source"), py::arg("kind") = "carbon")
      .def_property_readonly("points",
                             [](const grid::SignalTrace& t) {
                               std::vector<std::pair<double, double>> out;
                               for (const auto& p : t.points()) {
                                 out.emplace_back(to_unix_s(p.at), p.value);
                               }
                               return out;
                             })
      .def(
          "at",
          [](const grid::SignalTrace& t, double unix_s) {
            const auto& p = t.at(from_unix_s(unix_s));
            return std::make_pair(to_unix_s(p.at), p.value);
          },
          py::arg("unix_s"), "The row in force then: (its time, its value).")
      .def(
          "history_mean",
          [](const grid::SignalTrace& t, double unix_s, double window_s) {
            return t.history_mean(from_unix_s(unix_s),
                                  std::chrono::duration_cast<grid::Clock::duration>(
                                      std::chrono::duration<double>(window_s)));
          },
          py::arg("unix_s"), py::arg("window_s"),
          "The time-weighted mean over the part of the window before unix_s the rows cover, or "
          "None.")
      .def(
          "mean_over",
          [](const grid::SignalTrace& t, double unix_s, double horizon_s) {
            return t.mean_over(from_unix_s(unix_s),
                               std::chrono::duration_cast<grid::Clock::duration>(
                                   std::chrono::duration<double>(horizon_s)));
          },
          py::arg("unix_s"), py::arg("horizon_s"),
          "The time-weighted mean over [unix_s, unix_s + horizon_s), or None where the trace "
          "does not cover it.")
      .def(
          "with_leading",
          [](const grid::SignalTrace& t, double unix_s, double value) {
            return t.with_leading({from_unix_s(unix_s), value});
          },
          py::arg("unix_s"), py::arg("value"),
          "This trace led by (unix_s, value) where that is earlier than its first row.")
      .def_property_readonly("step_s",
                             [](const grid::SignalTrace& t) {
                               return std::chrono::duration<double>(t.step()).count();
                             })
      .def_property_readonly("mean", &grid::SignalTrace::mean)
      .def_property_readonly("max", &grid::SignalTrace::max)
      .def_property_readonly("source", &grid::SignalTrace::source);

  // The profile as (limit mW, energy J, time s) per limit over equal windows: one "iteration" a
  // window, so the per-iteration energy and time are the window's.
  py::class_<optimize::GridFollower>(
      m, "GridFollower",
      "The rule that follows the signal on a profile (optimize/grid_rule.h): chosen again every "
      "interval_s and on a move above relative_change; ties to the higher limit.")
      .def(py::init([](const std::vector<std::tuple<int64_t, double, double>>& profile, double eta,
                       double max_power_w, double signal_max, double interval_s,
                       double relative_change) {
             std::vector<optimize::LimitMeasurement> m;
             for (const auto& [limit_mw, energy_j, time_s] : profile) {
               if (!(energy_j > 0) || !(time_s > 0)) {
                 throw ConfigError("a profiled limit needs positive energy and time");
               }
               m.push_back({limit_mw, 1.0 / time_s, energy_j / time_s});
             }
             optimize::GridFollowerOptions o;
             o.eta = eta;
             o.max_power_w = max_power_w;
             o.signal_max = signal_max;
             o.interval = std::chrono::duration_cast<std::chrono::nanoseconds>(
                 std::chrono::duration<double>(interval_s));
             o.relative_change = relative_change;
             return optimize::GridFollower(std::move(m), o);
           }),
           py::arg("profile"), py::arg("eta"), py::arg("max_power_w"),
           py::arg("signal_max") = optimize::kGridReference, py::arg("interval_s") = 1800.0,
           py::arg("relative_change") = 0.10)
      .def(
          "observe",
          [](optimize::GridFollower& f, double signal, double now_s, std::optional<double> forecast,
             std::optional<double> reference) -> py::object {
            const auto c = f.observe(signal,
                                     std::chrono::duration_cast<std::chrono::nanoseconds>(
                                         std::chrono::duration<double>(now_s)),
                                     forecast, reference);
            if (!c) {
              return py::none();
            }
            py::dict d;
            d["power_limit_mw"] = c->limit_mw;
            d["changed"] = c->changed;
            d["reason"] = c->reason;
            d["signal"] = c->signal;
            d["reference"] = c->reference;
            return d;
          },
          py::arg("signal"), py::arg("now_s"), py::arg("forecast") = py::none(),
          py::arg("reference") = py::none(),
          "A dict (power_limit_mw, changed, reason, signal, reference) when the rule chose again, "
          "else None; the first call always chooses. `reference` is the grid's own (used where "
          "signal_max is 0).")
      .def_property_readonly("power_limit_mw", &optimize::GridFollower::limit_mw)
      .def_property_readonly("zeus_limit_mw", &optimize::GridFollower::zeus_limit_mw);

  m.def(
      "parse_grid_reference",
      [](const std::string& text, const std::string& what, bool carbon) {
        return optimize::parse_grid_reference(text, what, carbon);
      },
      py::arg("text"), py::arg("what"), py::arg("carbon"),
      "'grid' (0: the grid's own), 'chase' (750) or a number > 0, as ZEUS_MAX_CARBON_INTENSITY.");
  m.attr("GRID_REFERENCE_WINDOW_S") = std::chrono::duration<double>(grid::kReferenceWindow).count();
  m.def("grid_eta", &optimize::grid_eta, py::arg("eta"), py::arg("signal"), py::arg("signal_max"),
        "Zeus's knob under the signal (optimize/grid_rule.h).");
}

}  // namespace zeus::python
