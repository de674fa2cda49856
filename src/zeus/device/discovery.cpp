#include "zeus/device/discovery.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "zeus/common/errors.h"
#include "zeus/device/nvml/nvml_gpu_set.h"
#include "zeus/device/rapl/rapl_cpu_set.h"
#include "zeus/trace/power_trace.h"

namespace zeus::device {

std::vector<BackendStatus> discover_gpu_backends() {
  std::vector<BackendStatus> out;
  try {
    nvml::NvmlGpuSet gpus;
    std::vector<std::string> names;
    for (int i = 0; i < gpus.count(); ++i) {
      names.push_back(fmt::format("{}: {} ({})", i, gpus.name(i), gpus.uuid(i)));
    }
    out.push_back({"nvml", gpus.count() > 0,
                   gpus.count() > 0
                       ? fmt::format("{} GPU(s) via {}: {}", gpus.count(), gpus.library().path(),
                                     fmt::join(names, "; "))
                       : fmt::format("NVML loaded from {} but shows no GPU to this process "
                                     "(check CUDA_VISIBLE_DEVICES)",
                                     gpus.library().path())});
  } catch (const Error& e) {
    out.push_back({"nvml", false, e.what()});
  }
  try {
    const auto dir = trace::trace_dir();
    out.push_back({"sim", true,
                   fmt::format("simulated {} from the traces in {} (--device sim:<gpu>)",
                               fmt::join(trace::trace_gpu_models(), ", "), dir.string())});
  } catch (const Error& e) {
    out.push_back({"sim", false, e.what()});
  }
  return out;
}

BackendStatus discover_cpu_backend() {
  try {
    rapl::RaplCpuSet cpus;
    std::vector<std::string> names;
    for (int i = 0; i < cpus.count(); ++i) {
      names.push_back(cpus.name(i) + (cpus.has_dram(i) ? " (+dram)" : ""));
    }
    return {"rapl", true, fmt::format("{} package(s): {}", cpus.count(), fmt::join(names, ", "))};
  } catch (const Error& e) {
    return {"rapl", false, e.what()};
  }
}

std::unique_ptr<GpuSet> open_gpu_set(std::string_view locator, const OpenGpuSetOptions& options) {
  if (locator == "nvml" || locator == "auto") {
    nvml::NvmlGpuSetOptions nvml_options;
    nvml_options.respect_visible_devices = options.respect_visible_devices;
    if (locator == "nvml") {
      return std::make_unique<nvml::NvmlGpuSet>(nvml_options);
    }
    try {
      return std::make_unique<nvml::NvmlGpuSet>(nvml_options);
    } catch (const NotSupported& e) {
      throw ConfigError(fmt::format("no GPU backend available: {}", e.what()));
    }
  }
  if (locator.rfind("sim:", 0) == 0) {
    sim::SimGpuSetOptions sim_options = sim::parse_sim_spec(locator);
    sim_options.clock = options.sim_clock;
    sim_options.start_busy = options.sim_start_busy;
    return std::make_unique<sim::SimGpuSet>(std::move(sim_options));
  }
  throw ConfigError(fmt::format(
      "unknown device '{}'; use nvml, auto, or sim:<gpu>[:<workload>[:<batch size>]] with gpu "
      "one of {}",
      locator, fmt::join(trace::trace_gpu_models(), ", ")));
}

}  // namespace zeus::device
