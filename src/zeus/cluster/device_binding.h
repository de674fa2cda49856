// Which CUDA device a rank binds: one rule for the C++ runtime (distributed::choose_device) and the
// Python package (zeus_cpp.distributed.init_torch), so that both agree under every launcher.
// zeus_core, no CUDA: the caller says how many devices CUDA sees.
#pragma once

#include <optional>
#include <string>

#include "zeus/cluster/env.h"

namespace zeus::cluster {

struct CudaBindingRequest {
  int cuda_device_count = 0;                   // devices CUDA sees in this process
  std::optional<std::string> visible_devices;  // CUDA_VISIBLE_DEVICES, as set
  std::optional<int> cuda_device;              // an explicit choice (--cuda-device)
};

// The CUDA device index the rank binds:
//   1. an explicit choice;
//   2. 0 when the launcher gave this worker exactly one device of its own (CUDA_VISIBLE_DEVICES
//      holds one entry and CUDA sees one device: `zeus run --devices 2,3` gives local rank 1
//      device 3, which is its cuda:0);
//   3. the local rank.
// Throws ConfigError naming the rank, host, local rank, the devices visible and
// CUDA_VISIBLE_DEVICES, and what to do, when that device does not exist.
int cuda_device_index(const CudaBindingRequest& request, const Env& env);

// The list of devices the runtime shows this process, as the variable closest to it holds it:
// HIP_VISIBLE_DEVICES, else CUDA_VISIBLE_DEVICES (which CUDA and HIP read), else ROCm's
// ROCR_VISIBLE_DEVICES (the filter below HIP); std::nullopt when none is set. Rule 2 above reads
// it: under ROCm, HIP_VISIBLE_DEVICES=1 gives the worker one device of its own just as
// CUDA_VISIBLE_DEVICES=1 does under CUDA.
std::optional<std::string> runtime_visible_devices();

// "CUDA_VISIBLE_DEVICES='2,3'" or "CUDA_VISIBLE_DEVICES unset" (with ROCm's variables when set),
// for messages.
std::string describe_visible_devices(const std::optional<std::string>& visible);

}  // namespace zeus::cluster
