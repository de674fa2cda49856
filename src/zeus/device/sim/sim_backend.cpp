// The simulated GPU's entry in the registry (backends.cpp): GPUs backed by the Zeus traces.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "zeus/common/errors.h"
#include "zeus/device/registry.h"
#include "zeus/device/sim/sim_gpu_set.h"
#include "zeus/trace/power_trace.h"

namespace zeus::device::sim {

namespace {

BackendStatus probe() {
  try {
    const auto dir = trace::trace_dir();
    return {"sim", true,
            fmt::format("simulated {} from the traces in {} (--device sim:<gpu>)",
                        fmt::join(trace::trace_gpu_models(), ", "), dir.string())};
  } catch (const Error& e) {
    return {"sim", false, e.what()};
  }
}

std::unique_ptr<GpuSet> open(std::string_view locator, const OpenGpuSetOptions& options) {
  SimGpuSetOptions o = parse_sim_spec(locator);
  o.clock = options.sim_clock;
  o.start_busy = options.sim_start_busy;
  return std::make_unique<SimGpuSet>(std::move(o));
}

}  // namespace

GpuBackend backend() {
  return {.name = "sim",
          .syntax = "sim:<gpu>[*<slowdown>][,<gpu>...][:<workload>[:<batch size>]][@<state file>]",
          .machine = false,
          .probe = probe,
          .open = open};
}

}  // namespace zeus::device::sim
