// Which pod uses which GPU, from the kubelet's pod-resources API (gRPC over its Unix socket,
// v1.PodResourcesLister/List): the exporter and zeusd label a GPU's series and records with the
// pod, namespace and container the device plugin gave it to (dcgm-exporter's label names).
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

namespace zeus::kube {

struct DeviceOwner {
  std::string pod;
  std::string namespace_name;
  std::string container;
  bool operator==(const DeviceOwner&) const = default;
};

// Device id (a GPU UUID for NVIDIA's plugin) -> its owner.
using DeviceOwners = std::map<std::string, DeviceOwner>;

// One List call. Throws IoError naming the socket when the kubelet cannot be reached, does not
// answer within `timeout` or answers with an error status. Only devices of resources whose name
// contains "gpu" (nvidia.com/gpu, amd.com/gpu, ...) are kept.
DeviceOwners list_device_owners(const std::string& socket_path, std::chrono::milliseconds timeout);

// Keeps the owners fresh on a thread of its own, every `period`; readers never wait for the
// kubelet. A kubelet that does not answer is logged once (and its return once); the last map is
// kept meanwhile.
class PodResourcesWatcher {
 public:
  PodResourcesWatcher(std::string socket_path, std::chrono::milliseconds period);
  ~PodResourcesWatcher();
  PodResourcesWatcher(const PodResourcesWatcher&) = delete;
  PodResourcesWatcher& operator=(const PodResourcesWatcher&) = delete;

  // The owner of the device with this id, if a pod holds it.
  std::optional<DeviceOwner> owner(const std::string& device_id) const;
  // Reads the kubelet now (on the caller's thread); false when it failed.
  bool refresh();
  int64_t failures() const;

 private:
  void run();

  std::string socket_path_;
  std::chrono::milliseconds period_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool failing_ = false;
  int64_t failures_ = 0;
  DeviceOwners owners_;
  std::thread thread_;
};

}  // namespace zeus::kube
