#include "zeus/device/discovery.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <exception>
#include <mutex>
#include <optional>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"
#include "zeus/device/zeusd/zeusd_gpu_set.h"
#include "zeus/trace/power_trace.h"

namespace zeus::device {

BackendStatus machine_backend_status(std::string_view backend, const GpuSet& gpus,
                                     std::string_view via, std::string_view hint) {
  if (gpus.count() == 0) {
    return {std::string(backend), false,
            fmt::format("{} loaded but shows no GPU to this process (check {})", via, hint)};
  }
  std::vector<std::string> names;
  for (int i = 0; i < gpus.count(); ++i) {
    names.push_back(fmt::format("{}: {} ({})", i, gpus.name(i), gpus.uuid(i)));
  }
  return {std::string(backend), true,
          fmt::format("{} GPU(s) via {}: {}", gpus.count(), via, fmt::join(names, "; "))};
}

std::vector<BackendStatus> discover_gpu_backends() {
  std::vector<BackendStatus> out;
  for (const GpuBackend& b : gpu_backends()) {
    out.push_back(b.probe());
  }
  return out;
}

BackendStatus discover_cpu_backend() {
  std::optional<BackendStatus> first;
  for (const CpuBackend& b : cpu_backends()) {
    BackendStatus status = b.probe({});
    if (status.available) {
      return status;
    }
    if (!first) {
      first = std::move(status);
    }
  }
  return first.value_or(BackendStatus{"cpu", false, "no CPU backend is registered"});
}

std::unique_ptr<CpuSet> open_cpu_set(const OpenCpuSetOptions& options) {
  std::exception_ptr first;
  for (const CpuBackend& b : cpu_backends()) {
    try {
      return b.open(options);
    } catch (const Error&) {
      if (!first) {
        first = std::current_exception();
      }
    }
  }
  if (first) {
    std::rethrow_exception(first);
  }
  throw NotSupported("no CPU backend is registered");
}

namespace {

std::unique_ptr<GpuSet> open_machine(const GpuBackend& b, std::string_view locator,
                                     const OpenGpuSetOptions& options) {
  std::unique_ptr<GpuSet> set = b.open(locator, options);
  if (options.zeusd_from_env) {
    if (const auto endpoint = zeusd::ZeusdEndpoint::from_env()) {
      return std::make_unique<zeusd::ZeusdGpuSet>(std::move(set), *endpoint);
    }
  }
  return set;
}

// A machine with GPUs of two vendors: "auto" takes the first registered (NVML); say so once.
void say_other_vendors(const GpuBackend& taken) {
  static std::once_flag once;
  std::call_once(once, [&] {
    for (const GpuBackend& b : gpu_backends()) {
      if (!b.machine || b.name == taken.name) {
        continue;
      }
      if (const BackendStatus status = b.probe(); status.available) {
        logger().info(
            "--device auto took {}; this machine also has {} ({}): pass --device {} "
            "(ZEUS_DEVICE) to use those",
            taken.name, b.name, status.reason, b.name);
      }
    }
  });
}

// "auto": the machine backends in registration order.
std::unique_ptr<GpuSet> open_auto(const OpenGpuSetOptions& options) {
  std::unique_ptr<GpuSet> empty;  // the first that opened without a GPU
  std::vector<std::string> reasons;
  for (const GpuBackend& b : gpu_backends()) {
    if (!b.machine) {
      continue;
    }
    try {
      auto set = open_machine(b, b.name, options);
      if (set->count() > 0) {
        say_other_vendors(b);
        return set;
      }
      reasons.push_back(fmt::format("{}: no GPU visible", b.name));
      if (!empty) {
        empty = std::move(set);
      }
    } catch (const NotSupported& e) {
      reasons.push_back(fmt::format("{}: {}", b.name, e.what()));
    }
  }
  if (empty) {
    return empty;
  }
  throw ConfigError(fmt::format(
      "no GPU backend available ({}); on a machine without GPUs pass --device sim:v100 to "
      "simulate one",
      fmt::join(reasons, "; ")));
}

}  // namespace

std::unique_ptr<GpuSet> open_gpu_set(std::string_view locator, const OpenGpuSetOptions& options) {
  if (locator == "auto") {
    return open_auto(options);
  }
  if (const GpuBackend* b = find_gpu_backend(locator)) {
    return b->machine ? open_machine(*b, locator, options) : b->open(locator, options);
  }
  std::vector<std::string> forms{"auto"};
  for (const GpuBackend& b : gpu_backends()) {
    forms.push_back(b.syntax);
  }
  throw ConfigError(fmt::format("unknown device '{}'; use {} (simulated GPUs: {})", locator,
                                fmt::join(forms, ", "),
                                fmt::join(trace::trace_gpu_models(), ", ")));
}

}  // namespace zeus::device
