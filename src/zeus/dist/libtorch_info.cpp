#include "zeus/dist/libtorch_info.h"

#include <ATen/Parallel.h>
#include <torch/version.h>

namespace zeus::dist {

std::string libtorch_version() {
  return TORCH_VERSION;
}

int libtorch_num_threads() {
  return at::get_num_threads();
}

}  // namespace zeus::dist
