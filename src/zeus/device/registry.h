// The device layer's registry: every GPU backend zeus-cpp has, registered once (backends.cpp),
// each able to say whether this machine has it (probe) and to open its GPUs by locator. The job,
// `zeus monitor`, zeusd, the metrics exporter and the Python package all get their GPUs from
// open_gpu_set() (discovery.h), never from a backend by name; docs/architecture.md, "Adding a
// GPU vendor", says what a backend adds.
#pragma once

#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "zeus/device/cpu_set.h"
#include "zeus/device/gpu_set.h"

namespace zeus::device {

struct BackendStatus {
  std::string backend;  // "nvml", "sim", "rapl"
  bool available = false;
  std::string reason;  // what was found, or why it is unavailable and what to do
};

// How a simulated GPU's time passes (the sim backend's; an option of opening any set).
enum class SimClock {
  kVirtual,  // time advances only through run_iterations()/idle(): instant, deterministic
  kReal,     // time is the machine's monotonic clock; run_iterations() sleeps (demos)
};

struct OpenGpuSetOptions {
  // Honour CUDA_VISIBLE_DEVICES (the GPUs the user's program sees). Off: every GPU of the
  // machine (`zeus restore-limits` matching by UUID, zeusd, the exporter).
  bool respect_visible_devices = true;
  // Exactly these GPUs of the machine (machine indices), in this order: a node's local master
  // opening the GPUs its ranks use. Overrides respect_visible_devices. Machine backends only.
  std::optional<std::vector<int>> machine_indices;
  // Machine backends: make changes through the node daemon when ZEUSD_SOCK_PATH or
  // ZEUSD_HOST_PORT names one (zeusd/zeusd_gpu_set.h). zeusd itself opens with false.
  bool zeusd_from_env = true;
  // For sim: the clock, and whether GPUs start busy when the state is created.
  SimClock sim_clock = SimClock::kReal;
  bool sim_start_busy = false;
};

// Contract: `probe` and `open` may be called from any thread; `open` throws NotSupported when the
// backend's library is missing (with what was tried and what to do), ConfigError for a locator
// it cannot parse, and DeviceError subclasses for failing GPUs.
struct GpuBackend {
  std::string name;    // the locator's first word: "nvml", "sim"
  std::string syntax;  // the locator's form, for messages: "sim:<gpu>[:<workload>...]"
  // The machine's own GPUs: "auto" tries it (in registration order), and zeusd may route its
  // changes. A simulated backend is not.
  bool machine = false;
  std::function<BackendStatus()> probe;
  std::function<std::unique_ptr<GpuSet>(std::string_view locator, const OpenGpuSetOptions&)> open;
};

// A machine backend's probe answer for the set it opened: available when it shows a GPU, saying
// which (index, name, uuid) `via` what ("/usr/lib/libnvidia-ml.so.1"); otherwise that the
// library loaded but shows no GPU, and `hint` (the visibility variables to check).
BackendStatus machine_backend_status(std::string_view backend, const GpuSet& gpus,
                                     std::string_view via, std::string_view hint);

// Every registered backend, in the order "auto" tries them.
const std::vector<GpuBackend>& gpu_backends();
// The backend whose name is the locator's first word ("nvml", "sim:v100" -> "sim"), or nullptr.
const GpuBackend* find_gpu_backend(std::string_view locator);

struct OpenCpuSetOptions {
  // RAPL's powercap root; empty: $ZEUS_RAPL_ROOT, else /sys/class/powercap.
  std::filesystem::path rapl_root;
};

// The machine's CPU packages: `open` throws NotSupported when this machine lacks the backend
// (saying what was tried), PermissionError when its counters are unreadable.
struct CpuBackend {
  std::string name;  // "rapl"
  std::function<BackendStatus(const OpenCpuSetOptions&)> probe;
  std::function<std::unique_ptr<CpuSet>(const OpenCpuSetOptions&)> open;
};
const std::vector<CpuBackend>& cpu_backends();

}  // namespace zeus::device
