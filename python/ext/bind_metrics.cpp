// Pusher: zeus_cpp.metric's and the optimizer's pushes to a Pushgateway, over the C++ Pusher
// (the network off the caller's thread, a failed push logged once and dropped).
#include <pybind11/chrono.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "zeus/common/errors.h"
#include "zeus/job/job_metrics.h"
#include "zeus/metrics/exposition.h"
#include "zeus/metrics/pushgateway.h"

namespace py = pybind11;

namespace zeus::python {

namespace {

metrics::MetricType type_of(const std::string& name) {
  if (name == "gauge") {
    return metrics::MetricType::kGauge;
  }
  if (name == "counter") {
    return metrics::MetricType::kCounter;
  }
  if (name == "histogram") {
    return metrics::MetricType::kHistogram;
  }
  throw ConfigError("metric type '" + name + "': gauge, counter or histogram");
}

using SampleTuple =
    std::tuple<std::vector<std::pair<std::string, std::string>>, double, std::string>;
using FamilyTuple = std::tuple<std::string, std::string, std::string, std::vector<SampleTuple>>;

std::vector<metrics::Family> families_of(const std::vector<FamilyTuple>& in) {
  std::vector<metrics::Family> out;
  for (const auto& [name, help, type, samples] : in) {
    metrics::Family f{name, help, type_of(type), {}};
    for (const auto& [labels, value, suffix] : samples) {
      f.samples.push_back(metrics::Sample{labels, value, suffix});
    }
    out.push_back(std::move(f));
  }
  return out;
}

}  // namespace

void bind_metrics(py::module_& m) {
  py::class_<metrics::Pusher>(m, "Pusher",
                              "Pushes metric families to a Pushgateway group off the caller's "
                              "thread; the newest state wins.")
      .def(py::init([](const std::string& url, const std::string& job, double timeout_s) {
             return std::make_unique<metrics::Pusher>(metrics::PushgatewayOptions{
                 url, job, std::chrono::milliseconds(static_cast<int64_t>(timeout_s * 1000))});
           }),
           py::arg("url"), py::arg("job"), py::arg("timeout_s") = 2.0)
      .def(
          "push",
          [](metrics::Pusher& p, const std::vector<FamilyTuple>& families) {
            p.push(families_of(families));
          },
          py::arg("families"),
          "families: [(name, help, 'gauge'|'counter'|'histogram', [(labels, value, "
          "suffix)])]")
      .def("flush", &metrics::Pusher::flush, py::call_guard<py::gil_scoped_release>())
      .def_property_readonly("sent", &metrics::Pusher::sent)
      .def_property_readonly("failed", &metrics::Pusher::failed)
      .def_property_readonly("group_url", &metrics::Pusher::group_url);
  m.def(
      "render_metrics",
      [](const std::vector<FamilyTuple>& families) {
        return metrics::render(families_of(families));
      },
      py::arg("families"), "The families in Prometheus's text format 0.0.4.");
  m.def(
      "job_state_families",
      [](int epochs_done, double energy_j, double time_s, double cost, int64_t power_limit_mw,
         std::optional<int64_t> optimal_power_limit_mw, int64_t max_power_limit_mw,
         const std::string& phase, bool finished) {
        job::JobState s;
        s.epochs_done = epochs_done;
        s.energy_j = energy_j;
        s.time_s = time_s;
        s.cost = cost;
        s.power_limit_mw = power_limit_mw;
        s.optimal_power_limit_mw = optimal_power_limit_mw;
        s.max_power_limit_mw = max_power_limit_mw;
        s.phase = phase == "profiling" ? job::JobState::Phase::kProfiling
                  : phase == "optimal" ? job::JobState::Phase::kOptimal
                                       : job::JobState::Phase::kMeasureOnly;
        s.cost_threshold = std::numeric_limits<double>::infinity();
        s.finished = finished;
        std::vector<FamilyTuple> out;
        for (const metrics::Family& f : job::job_families(s)) {
          std::vector<SampleTuple> samples;
          for (const metrics::Sample& x : f.samples) {
            samples.emplace_back(x.labels, x.value, x.suffix);
          }
          out.emplace_back(f.name, f.help, "gauge", std::move(samples));
        }
        return out;
      },
      "The zeus_job_* families of a job's state (what the C++ loader pushes).");
}

}  // namespace zeus::python
