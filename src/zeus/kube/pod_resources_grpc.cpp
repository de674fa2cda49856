// list_device_owners over gRPC (builds with libgrpc++-dev and protobuf-compiler-grpc).
#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "podresources/v1/api.grpc.pb.h"
#include "zeus/common/errors.h"
#include "zeus/common/parse.h"
#include "zeus/kube/device_ids.h"
#include "zeus/kube/pod_resources.h"

namespace zeus::kube {

bool pod_resources_supported() {
  return true;
}

DeviceOwners list_device_owners(const std::string& socket_path, std::chrono::milliseconds timeout) {
  auto channel = grpc::CreateChannel("unix://" + socket_path, grpc::InsecureChannelCredentials());
  auto stub = v1::PodResourcesLister::NewStub(channel);
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() + timeout);
  v1::ListPodResourcesRequest request;
  v1::ListPodResourcesResponse response;
  const grpc::Status status = stub->List(&context, request, &response);
  if (!status.ok()) {
    throw IoError(fmt::format("the kubelet's pod-resources API at {}: {} ({})", socket_path,
                              status.error_message(), static_cast<int>(status.error_code())));
  }
  DeviceOwners owners;
  for (const auto& pod : response.pod_resources()) {
    for (const auto& container : pod.containers()) {
      for (const auto& devices : container.devices()) {
        if (!is_gpu_resource(devices.resource_name())) {
          continue;
        }
        for (const auto& id : devices.device_ids()) {
          owners[to_lower(id)] = {pod.name(), pod.namespace_(), container.name()};
        }
      }
    }
  }
  return owners;
}

}  // namespace zeus::kube
