// The grid's signal and the rule's knob, for zeus_cpp.monitor.carbon/price and
// CarbonAwarePowerLimitOptimizer: the same trace reader and the same knob as zeus::DataLoader's
// jobs and `zeus simulate --carbon` (the optimizer chooses with ZeusCost at that knob).
#include <pybind11/stl.h>

#include <chrono>
#include <optional>
#include <string>
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
      .def_property_readonly("step_s",
                             [](const grid::SignalTrace& t) {
                               return std::chrono::duration<double>(t.step()).count();
                             })
      .def_property_readonly("mean", &grid::SignalTrace::mean)
      .def_property_readonly("max", &grid::SignalTrace::max)
      .def_property_readonly("source", &grid::SignalTrace::source);

  m.def("grid_eta", &optimize::grid_eta, py::arg("eta"), py::arg("signal"), py::arg("signal_max"),
        "Zeus's knob under the signal (optimize/grid_rule.h).");
}

}  // namespace zeus::python
