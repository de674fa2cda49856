// A build without gRPC (the pip wheel, or no libgrpc++-dev): the kubelet cannot be read; asking
// for it is a ConfigError saying which build has it.
#include <fmt/format.h>

#include "zeus/common/build_info.h"
#include "zeus/common/errors.h"
#include "zeus/kube/pod_resources.h"

namespace zeus::kube {

bool pod_resources_supported() {
  return false;
}

DeviceOwners list_device_owners(const std::string& socket_path, std::chrono::milliseconds) {
  throw ConfigError(left_out_message("kubelet", fmt::format("--kubelet-socket {}", socket_path)));
}

}  // namespace zeus::kube
