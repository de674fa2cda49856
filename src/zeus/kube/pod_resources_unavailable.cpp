// A build without gRPC: the kubelet cannot be read; asking for it is a ConfigError saying what
// to install.
#include <fmt/format.h>

#include "zeus/common/errors.h"
#include "zeus/kube/pod_resources.h"

namespace zeus::kube {

bool pod_resources_supported() {
  return false;
}

DeviceOwners list_device_owners(const std::string& socket_path, std::chrono::milliseconds) {
  throw ConfigError(fmt::format(
      "--kubelet-socket {}: this build cannot read the kubelet (it was configured without gRPC); "
      "install libgrpc++-dev, protobuf-compiler and protobuf-compiler-grpc "
      "(scripts/install-deps.sh) and rebuild",
      socket_path));
}

}  // namespace zeus::kube
