#include "zeus/kube/pod_resources.h"

#include <fmt/format.h>
#include <grpcpp/grpcpp.h>

#include "podresources/v1/api.grpc.pb.h"
#include "zeus/common/errors.h"
#include "zeus/common/logging.h"

namespace zeus::kube {

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
        if (devices.resource_name().find("gpu") == std::string::npos) {
          continue;
        }
        for (const auto& id : devices.device_ids()) {
          owners[id] = {pod.name(), pod.namespace_(), container.name()};
        }
      }
    }
  }
  return owners;
}

PodResourcesWatcher::PodResourcesWatcher(std::string socket_path, std::chrono::milliseconds period)
    : socket_path_(std::move(socket_path)), period_(period) {
  thread_ = std::thread([this] { run(); });
}

PodResourcesWatcher::~PodResourcesWatcher() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

std::optional<DeviceOwner> PodResourcesWatcher::owner(const std::string& device_id) const {
  std::lock_guard lock(mu_);
  const auto it = owners_.find(device_id);
  return it == owners_.end() ? std::nullopt : std::optional(it->second);
}

int64_t PodResourcesWatcher::failures() const {
  std::lock_guard lock(mu_);
  return failures_;
}

bool PodResourcesWatcher::refresh() {
  try {
    DeviceOwners owners = list_device_owners(socket_path_, std::chrono::seconds(2));
    std::lock_guard lock(mu_);
    if (failing_) {
      logger().info("the kubelet's pod-resources API at {} answers again", socket_path_);
      failing_ = false;
    }
    owners_ = std::move(owners);
    return true;
  } catch (const Error& e) {
    std::lock_guard lock(mu_);
    ++failures_;
    if (!failing_) {
      logger().warn(
          "{}; GPUs keep the pods last seen (none before the first answer), retried "
          "every {} ms",
          e.what(), period_.count());
      failing_ = true;
    }
    return false;
  }
}

void PodResourcesWatcher::run() {
  while (true) {
    refresh();
    std::unique_lock lock(mu_);
    if (cv_.wait_for(lock, period_, [this] { return stop_; })) {
      return;
    }
  }
}

}  // namespace zeus::kube
