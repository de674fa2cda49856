#include <pybind11/stl.h>

#include <map>
#include <string>
#include <vector>

#include "bindings.h"
#include "zeus/cluster/device_binding.h"
#include "zeus/cluster/env.h"
#include "zeus/contract/worker_env.h"

namespace py = pybind11;

namespace zeus::python {

void bind_cluster(py::module_& m) {
  py::enum_<cluster::EnvSource>(m, "EnvSource")
      .value("explicit", cluster::EnvSource::kExplicit)
      .value("torchrun", cluster::EnvSource::kTorchrun)
      .value("legacy_local_rank", cluster::EnvSource::kLegacyLocalRank)
      .value("slurm", cluster::EnvSource::kSlurm)
      .value("open_mpi", cluster::EnvSource::kOpenMpi)
      .value("single", cluster::EnvSource::kSingle);

  py::class_<cluster::Env>(m, "Env", "Who this process is in a distributed job.")
      .def_readonly("rank", &cluster::Env::rank)
      .def_readonly("local_rank", &cluster::Env::local_rank)
      .def_readonly("world_size", &cluster::Env::world_size)
      .def_readonly("local_world_size", &cluster::Env::local_world_size)
      .def_readonly("node_rank", &cluster::Env::node_rank)
      .def_readonly("master_addr", &cluster::Env::master_addr)
      .def_readonly("master_port", &cluster::Env::master_port)
      .def_readonly("agent_store", &cluster::Env::agent_store)
      .def_readonly("restart_count", &cluster::Env::restart_count)
      .def_readonly("source", &cluster::Env::source)
      .def("is_master", &cluster::Env::is_master)
      .def("is_local_master", &cluster::Env::is_local_master)
      .def("describe", &cluster::Env::describe)
      .def("__repr__", [](const cluster::Env& e) { return "<Env " + e.describe() + ">"; });

  // argv: the process's arguments without the program name; a --local_rank there (the legacy
  // launcher's) counts. Nothing is removed from the caller's list.
  m.def(
      "detect_env",
      [](std::vector<std::string> argv) {
        cluster::EnvOptions options;
        options.legacy_local_rank = cluster::take_local_rank_arg(argv);
        return cluster::detect_env(options);
      },
      py::arg("argv") = std::vector<std::string>{},
      "Detects rank, world and master from torchrun / zeus run variables, a --local_rank "
      "argument, Slurm or Open MPI; raises ConfigError naming a bad variable.");
  m.def(
      "cuda_device_index",
      [](const cluster::Env& env, int cuda_device_count, std::optional<std::string> visible) {
        return cluster::cuda_device_index(
            {.cuda_device_count = cuda_device_count, .visible_devices = std::move(visible)}, env);
      },
      py::arg("env"), py::arg("cuda_device_count"), py::arg("visible_devices"),
      "The CUDA device index this rank binds (the C++ runtime's rule): 0 when the launcher gave "
      "the worker one device of its own, else the local rank; ConfigError when it does not "
      "exist.");
  m.def("runtime_visible_devices", &cluster::runtime_visible_devices,
        "The device list the runtime shows this process: HIP_VISIBLE_DEVICES, else "
        "CUDA_VISIBLE_DEVICES, else ROCR_VISIBLE_DEVICES; None when none is set.");
  m.def(
      "worker_env_vars",
      [](const cluster::Env& e) {
        contract::WorkerEnv w;
        w.rank = e.rank;
        w.local_rank = e.local_rank;
        w.world_size = e.world_size;
        w.local_world_size = e.local_world_size;
        w.group_rank = e.node_rank;
        w.master_addr = e.master_addr;
        w.master_port = e.master_port;
        w.restart_count = e.restart_count;
        w.use_agent_store = e.agent_store;
        auto vars = w.to_env();
        std::erase_if(vars, [](const auto& kv) { return kv.second.empty(); });
        return vars;
      },
      py::arg("env"),
      "The variables a worker of this world gets from zeus run (torchrun's names), as a dict: "
      "what env:// initialization reads, for launchers that do not set them.");
  m.def(
      "resolve_error", [](const std::string& host) { return cluster::resolve_error(host); },
      py::arg("host"), "None when host resolves, else the resolver's reason.");
}

}  // namespace zeus::python
