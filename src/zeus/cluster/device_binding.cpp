#include "zeus/cluster/device_binding.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <array>
#include <vector>

#include "zeus/common/env.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/common/posix.h"

namespace zeus::cluster {
namespace {

// The runtimes' visibility variables, the one closest to the runtime first.
constexpr std::array kVisibilityVars{kEnvHipVisibleDevices, kEnvCudaVisibleDevices,
                                     kEnvRocrVisibleDevices};

}  // namespace

std::optional<std::string> runtime_visible_devices() {
  for (const EnvVar& var : kVisibilityVars) {
    if (auto value = get_env_set(var)) {
      return value;
    }
  }
  return std::nullopt;
}

std::string describe_visible_devices(const std::optional<std::string>& visible) {
  std::vector<std::string> set;
  for (const EnvVar& var : kVisibilityVars) {
    if (const auto value = get_env_set(var)) {
      set.push_back(fmt::format("{}='{}'", var.name, *value));
    }
  }
  if (!set.empty()) {
    return fmt::format("{}", fmt::join(set, ", "));
  }
  return visible ? fmt::format("CUDA_VISIBLE_DEVICES='{}'", *visible)
                 : std::string("CUDA_VISIBLE_DEVICES unset");
}

int cuda_device_index(const CudaBindingRequest& request, const Env& env) {
  int index = env.local_rank;
  if (request.cuda_device) {
    index = *request.cuda_device;
  } else if (request.cuda_device_count == 1 && request.visible_devices &&
             split(*request.visible_devices, ',').size() == 1) {
    index = 0;
  }
  if (index < 0 || index >= request.cuda_device_count) {
    throw ConfigError(fmt::format(
        "rank {} (host {}, local rank {} of {}): needs CUDA device {} but {} device(s) are "
        "visible ({}); run at most as many processes per node as it has GPUs, give each worker "
        "its own with `zeus run --devices`, or train on the CPU (--device-type cpu)",
        env.rank, host_name(), env.local_rank, env.local_world_size, index,
        request.cuda_device_count, describe_visible_devices(request.visible_devices)));
  }
  return index;
}

}  // namespace zeus::cluster
