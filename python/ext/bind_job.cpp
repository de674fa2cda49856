#include <fmt/format.h>
#include <pybind11/functional.h>
#include <pybind11/stl.h>
#include <pybind11/stl/filesystem.h>

#include <algorithm>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "bindings.h"
#include "zeus/common/errors.h"
#include "zeus/contract/train_result.h"
#include "zeus/job/collectives.h"
#include "zeus/job/energy_job.h"
#include "zeus/job/gpu_plan.h"
#include "zeus/job/job_options.h"
#include "zeus/job/loader_pairing.h"
#include "zeus/optimize/power_profile.h"

namespace py = pybind11;

namespace zeus::python {
namespace {

// The job's collectives, done by a Python object (zeus_cpp._collectives.TorchCollectives) over
// torch.distributed: attributes rank, world_size, local_rank, local_world_size, node_rank, and
// methods all_reduce_sum(list[float]) -> list[float] and broadcast(list[float], root) -> list.
// The job calls them from the thread that drives it, which holds the GIL.
class PythonCollectives final : public job::Collectives {
 public:
  explicit PythonCollectives(py::object impl) : impl_(std::move(impl)) {
    ranks_.rank = impl_.attr("rank").cast<int>();
    ranks_.world_size = impl_.attr("world_size").cast<int>();
    ranks_.local_rank = impl_.attr("local_rank").cast<int>();
    ranks_.local_world_size = impl_.attr("local_world_size").cast<int>();
    ranks_.node_rank = impl_.attr("node_rank").cast<int>();
    if (ranks_.world_size < 1 || ranks_.rank < 0 || ranks_.rank >= ranks_.world_size ||
        ranks_.local_rank < 0 || ranks_.local_rank >= ranks_.local_world_size) {
      throw ConfigError(fmt::format(
          "inconsistent ranks: rank {} of {}, local rank {} of {}, node {}", ranks_.rank,
          ranks_.world_size, ranks_.local_rank, ranks_.local_world_size, ranks_.node_rank));
    }
  }

  job::RankInfo ranks() const override { return ranks_; }
  void all_reduce_sum(std::span<double> values) override {
    call(impl_.attr("all_reduce_sum")(to_list(values)), values, "all_reduce_sum");
  }
  void broadcast(std::span<double> values, int root) override {
    call(impl_.attr("broadcast")(to_list(values), root), values, "broadcast");
  }

 private:
  static py::list to_list(std::span<const double> values) {
    py::list list(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
      list[i] = values[i];
    }
    return list;
  }
  static void call(const py::object& out, std::span<double> values, const char* what) {
    const auto result = out.cast<std::vector<double>>();
    if (result.size() != values.size()) {
      throw InternalError(
          fmt::format("{} returned {} values for {}", what, result.size(), values.size()));
    }
    std::copy(result.begin(), result.end(), values.begin());
  }

  py::object impl_;
  job::RankInfo ranks_;
};

// The Python object behind ZeusDataLoader's job: owns the collectives the job refers to.
class Job {
 public:
  Job(const job::JobOptions& options, int max_epochs, int64_t per_rank_batch_size,
      py::object collectives, job::RankDevice device)
      : collectives_(std::make_unique<PythonCollectives>(std::move(collectives))) {
    const auto resolved = job::resolve_job_options(options, max_epochs, per_rank_batch_size,
                                                   collectives_->ranks().world_size);
    if (resolved.service) {
      // The PyTorch loader's batch size is fixed before the job exists: it cannot run at the
      // service's (docs/bso-server.md).
      throw ConfigError(fmt::format(
          "ZEUS_BSO_SERVER_URL is set ({}), but zeus_cpp's ZeusDataLoader does not take its batch "
          "size from the batch-size service: ask it with "
          "zeus_cpp.optimizer.batch_size.BatchSizeOptimizer and build the loader with its batch "
          "size, or unset ZEUS_BSO_SERVER_URL",
          resolved.service->url));
    }
    job_ = std::make_unique<job::EnergyJob>(resolved, *collectives_, std::move(device));
  }

  job::EnergyJob& get() {
    if (!job_) {
      throw ConfigError("the job is closed (its loader was closed or the process is exiting)");
    }
    return *job_;
  }
  // Restores the limits and releases the devices; later calls raise. Idempotent.
  void close() { job_.reset(); }
  bool closed() const { return job_ == nullptr; }

 private:
  std::unique_ptr<PythonCollectives> collectives_;  // outlives job_
  std::unique_ptr<job::EnergyJob> job_;
};

}  // namespace

void bind_job(py::module_& m) {
  py::class_<job::JobOptions>(m, "JobOptions",
                              "Options of one job; None takes the ZEUS_* variable, then Zeus's "
                              "default.")
      .def(py::init<>())
      .def_readwrite("eta", &job::JobOptions::eta)
      .def_readwrite("cost_threshold", &job::JobOptions::cost_threshold)
      .def_readwrite("target_metric", &job::JobOptions::target_metric)
      .def_readwrite("higher_is_better", &job::JobOptions::higher_is_better)
      .def_readwrite("warmup_iters", &job::JobOptions::warmup_iters)
      .def_readwrite("profile_iters", &job::JobOptions::profile_iters)
      .def_readwrite("log_dir", &job::JobOptions::log_dir)
      .def_readwrite("job_id", &job::JobOptions::job_id)
      .def_readwrite("observer_mode", &job::JobOptions::observer_mode)
      .def_readwrite("measure_only", &job::JobOptions::measure_only)
      .def_readwrite("device", &job::JobOptions::device)
      .def_readwrite("selector", &job::JobOptions::selector)
      .def_readwrite("per_gpu_limits", &job::JobOptions::per_gpu_limits)
      .def_readwrite("power_limit_step_mw", &job::JobOptions::power_limit_step_mw)
      .def_readwrite("progress_bar", &job::JobOptions::progress_bar);

  py::class_<job::RankDevice>(m, "RankDevice", "What this rank trains on.")
      .def(py::init<>())
      .def_readwrite("cuda_index", &job::RankDevice::cuda_index)
      .def_readwrite("cuda_uuid", &job::RankDevice::cuda_uuid)
      .def_readwrite("synchronize", &job::RankDevice::synchronize);

  // A data-parallel job's per-GPU plan (job/gpu_plan.h) for the Python optimizer: the same
  // curves from the profiling windows, the same plan and the same pace checks as zeus::DataLoader.
  py::class_<job::GpuPlan>(m, "GpuPlan")
      .def(py::init([](std::vector<double> idle_power_w, std::vector<int64_t> max_limit_mw,
                       double eta, const std::string& selector) {
             return job::GpuPlan(std::move(idle_power_w), std::move(max_limit_mw),
                                 {.eta = eta, .selector = optimize::parse_selector(selector)});
           }),
           py::arg("idle_power_w"), py::arg("max_limit_mw"), py::arg("eta"), py::arg("selector"))
      .def(
          "add_window",
          [](job::GpuPlan& p, int64_t limit_mw, int64_t iterations, double window_s,
             const std::vector<double>& own_s, const std::vector<double>& energy_j) {
            p.add_window(limit_mw, iterations, window_s, own_s, energy_j);
          },
          py::arg("limit_mw"), py::arg("iterations"), py::arg("window_s"), py::arg("own_s"),
          py::arg("energy_j"))
      .def(
          "plan", [](job::GpuPlan& p) { return p.plan().limits_mw; },
          "Makes the plan; returns each GPU's limit (mW).")
      .def(
          "observe",
          [](job::GpuPlan& p, int64_t steps, const std::vector<double>& own_s) {
            return p.observe(steps, own_s);
          },
          py::arg("steps"), py::arg("own_s"), "A pace check: why the plan changed, or None.")
      .def(
          "curves_json",
          [](const job::GpuPlan& p,
             const std::vector<std::pair<std::string, std::string>>& owners) {
            std::vector<optimize::GpuCurve> curves = p.curves();
            for (size_t r = 0; r < curves.size() && r < owners.size(); ++r) {
              curves[r].uuid = owners[r].first;
              curves[r].host = owners[r].second;
            }
            return optimize::curves_to_json(curves);
          },
          py::arg("owners"),
          "The profiled curves (the profile file's per_gpu array) under each rank's (uuid, host).")
      .def(
          "load_json",
          [](job::GpuPlan& p, const std::string& text,
             const std::vector<std::pair<std::string, std::string>>& owners,
             const std::string& source) -> std::optional<std::string> {
            std::vector<optimize::CurveOwner> gpus;
            for (const auto& [uuid, host] : owners) {
              gpus.push_back({uuid, host});
            }
            optimize::CurvesMatch m =
                optimize::match_curves(optimize::curves_from_json(text, source), gpus);
            if (!m.curves) {
              return m.why_not;
            }
            p.load(std::move(*m.curves));
            return std::nullopt;
          },
          py::arg("text"), py::arg("owners"), py::arg("source"),
          "Loads saved curves of these GPUs (by UUID and host): None, else why not.")
      .def("set_eta", &job::GpuPlan::set_eta, py::arg("eta"),
           "Zeus's knob for the next plan() (the grid's signal moves it).")
      .def_property_readonly("limits_mw", &job::GpuPlan::limits_mw)
      .def_property_readonly("pace", &job::GpuPlan::pace)
      // Per step under the model: the plan's and Zeus's one limit's (None: no shared limit).
      .def_property_readonly("energy_j", [](job::GpuPlan& p) { return p.outcome().energy_j; })
      .def_property_readonly("single_energy_j", [](job::GpuPlan& p) -> std::optional<double> {
        return p.single() ? std::optional(p.single()->energy_j) : std::nullopt;
      });

  m.def(
      "parse_bool",
      [](const std::string& text, const std::string& what) { return job::parse_bool(text, what); },
      py::arg("text"), py::arg("what"));

  py::class_<job::LoaderPairing>(
      m, "LoaderPairing",
      "The train loader and its eval loaders (Note [loader pairing]): the rules and errors of "
      "C++'s zeus::DataLoader, by loader id.")
      .def(py::init<std::string>(), py::arg("loader_name"))
      .def("add_train", [](job::LoaderPairing& p) { return p.add_train(); })
      .def("add_eval", &job::LoaderPairing::add_eval)
      .def("remove", &job::LoaderPairing::remove, py::arg("id"))
      .def("check_can_start_epochs", &job::LoaderPairing::check_can_start_epochs)
      .def_property_readonly("train", &job::LoaderPairing::train)
      .def_property_readonly("eval_loaders", &job::LoaderPairing::eval_loaders);

  // Every method but the accessors contains collectives: every rank calls them in the same order.
  py::class_<Job>(m, "EnergyJob")
      .def(py::init<const job::JobOptions&, int, int64_t, py::object, job::RankDevice>(),
           py::arg("options"), py::arg("max_epochs"), py::arg("per_rank_batch_size"),
           py::arg("collectives"), py::arg("device"))
      .def("next_epoch", [](Job& j) { return j.get().next_epoch(); })
      .def("begin_train_epoch", [](Job& j, int64_t n) { j.get().begin_train_epoch(n); })
      .def("train_step_begin", [](Job& j) { j.get().train_step_begin(); })
      .def("train_step_end", [](Job& j) { j.get().train_step_end(); })
      .def("end_train_epoch", [](Job& j) { j.get().end_train_epoch(); })
      .def("begin_eval_epoch", [](Job& j, int64_t n) { j.get().begin_eval_epoch(n); })
      .def("eval_step_end", [](Job& j) { j.get().eval_step_end(); })
      .def("end_eval_epoch", [](Job& j) { j.get().end_eval_epoch(); })
      .def(
          "report_metric",
          [](Job& j, double metric, bool higher) { j.get().report_metric(metric, higher); },
          py::arg("metric"), py::arg("higher_is_better"))
      .def("close", &Job::close)
      .def_property_readonly("closed", &Job::closed)
      .def_property_readonly("profiling_done", [](Job& j) { return j.get().profiling_done(); })
      .def_property_readonly("optimal_power_limit_mw",
                             [](Job& j) { return j.get().optimal_power_limit_mw(); })
      .def_property_readonly("current_power_limit_mw",
                             [](Job& j) { return j.get().current_power_limit_mw(); })
      .def_property_readonly("global_batch_size",
                             [](Job& j) { return j.get().options().global_batch_size; })
      .def_property_readonly("log_dir", [](Job& j) { return j.get().options().log_dir; })
      .def_property_readonly("job_id", [](Job& j) { return j.get().options().job_id; })
      .def_property_readonly("cost_threshold",
                             [](Job& j) { return j.get().options().cost_threshold; })
      .def_property_readonly("measure_only", [](Job& j) { return j.get().options().measure_only; })
      // The result as the file's JSON text, once training is over (None before).
      .def_property_readonly("result_json", [](Job& j) -> std::optional<std::string> {
        const auto& r = j.get().result();
        return r ? std::optional(contract::to_json(*r)) : std::nullopt;
      });
}

}  // namespace zeus::python
