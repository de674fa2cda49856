// Facts about the libtorch zeus_torch was built against. The rest of zeus_torch (process
// groups, sync_model, DistributedSampler, DataLoader) lands with the distributed issue.
#pragma once

#include <string>

namespace zeus::distributed {

// libtorch's version, e.g. "1.13.1".
std::string libtorch_version();
// Number of intra-op threads libtorch will use (at::get_num_threads()).
int libtorch_num_threads();

}  // namespace zeus::distributed
