#include "zeus/distributed/libtorch_info.h"

#include <ATen/Parallel.h>
#include <torch/version.h>

namespace zeus::distributed {

std::string libtorch_version() {
  return TORCH_VERSION;
}

int libtorch_num_threads() {
  return at::get_num_threads();
}

}  // namespace zeus::distributed
