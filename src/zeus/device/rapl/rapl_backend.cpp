// RAPL's entry in the registry (backends.cpp): CPU package and DRAM energy through powercap.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include "zeus/common/errors.h"
#include "zeus/device/rapl/rapl_cpu_set.h"
#include "zeus/device/registry.h"

namespace zeus::device::rapl {

namespace {

std::unique_ptr<CpuSet> open(const OpenCpuSetOptions& options) {
  return std::make_unique<RaplCpuSet>(RaplCpuSetOptions{options.rapl_root});
}

BackendStatus probe(const OpenCpuSetOptions& options) {
  try {
    const RaplCpuSet cpus(RaplCpuSetOptions{options.rapl_root});
    std::vector<std::string> names;
    for (int i = 0; i < cpus.count(); ++i) {
      names.push_back(cpus.name(i) + (cpus.has_dram(i) ? " (+dram)" : ""));
    }
    return {"rapl", true, fmt::format("{} package(s): {}", cpus.count(), fmt::join(names, ", "))};
  } catch (const Error& e) {
    return {"rapl", false, e.what()};
  }
}

}  // namespace

CpuBackend backend() {
  return {.name = "rapl", .probe = probe, .open = open};
}

}  // namespace zeus::device::rapl
