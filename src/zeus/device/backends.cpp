// The one registration of every GPU and CPU backend: a new vendor adds its folder under device/ and
// one line here (docs/architecture.md, "Adding a GPU vendor").
#include "zeus/device/registry.h"

namespace zeus::device {

namespace nvml {
GpuBackend backend();  // nvml/nvml_backend.cpp
}  // namespace nvml
namespace amdsmi {
GpuBackend backend();  // amdsmi/amdsmi_backend.cpp
}  // namespace amdsmi
namespace sim {
GpuBackend backend();  // sim/sim_backend.cpp
}  // namespace sim
namespace rapl {
CpuBackend backend();  // rapl/rapl_backend.cpp
}  // namespace rapl

const std::vector<GpuBackend>& gpu_backends() {
  static const std::vector<GpuBackend> all{nvml::backend(), amdsmi::backend(), sim::backend()};
  return all;
}

const std::vector<CpuBackend>& cpu_backends() {
  static const std::vector<CpuBackend> all{rapl::backend()};
  return all;
}

const GpuBackend* find_gpu_backend(std::string_view locator) {
  const std::string_view word = locator.substr(0, locator.find(':'));
  for (const GpuBackend& b : gpu_backends()) {
    if (b.name == word) {
      return &b;
    }
  }
  return nullptr;
}

}  // namespace zeus::device
