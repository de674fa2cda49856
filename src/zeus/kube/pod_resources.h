// Which pod uses which GPU, from the kubelet's pod-resources API (gRPC over its Unix socket,
// v1.PodResourcesLister/List): the exporter and zeusd label a GPU's series and records with the
// pod, namespace and container the device plugin gave it to (dcgm-exporter's label names).
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "zeus/kube/device_ids.h"

namespace zeus::kube {

struct DeviceOwner {
  std::string pod;
  std::string namespace_name;
  std::string container;
  bool operator==(const DeviceOwner&) const = default;
};

// Device id -> its owner. NVIDIA's device plugin lists a GPU by its UUID ("GPU-..."), AMD's
// (ROCm/k8s-device-plugin, amd.com/gpu) by its PCI address ("0000:c1:00.0"). Keys are lower
// case, as are the lookups (owner_of_gpu), so either spelling matches.
using DeviceOwners = std::map<std::string, DeviceOwner>;

// dcgm-exporter's labels of a GPU's series: pod, namespace and container, each "" when no pod
// holds the GPU (metrics::Labels).
std::vector<std::pair<std::string, std::string>> owner_labels(
    const std::optional<DeviceOwner>& owner);

// Several pods holding one GPU (time-slicing, MPS, MIG) as one owner: each field the owners'
// values joined by "," in the owners' order (sorted by namespace, pod, container; duplicates
// dropped), so that a series or a record names every pod and no label set changes shape.
DeviceOwner merge_owners(std::vector<DeviceOwner> owners);

// Whether this build reads the kubelet (gRPC found at configure time: libgrpc++-dev,
// protobuf-compiler-grpc). Without it list_device_owners and the watcher's constructor throw a
// ConfigError saying so.
bool pod_resources_supported();

// One List call. Throws IoError naming the socket when the kubelet cannot be reached, does not
// answer within `timeout` or answers with an error status. Only devices of resources whose name
// contains "gpu" (nvidia.com/gpu, amd.com/gpu, ...) are kept.
DeviceOwners list_device_owners(const std::string& socket_path, std::chrono::milliseconds timeout);

struct WatcherOptions {
  std::chrono::milliseconds period{5000};  // between two List calls
  // A kubelet silent this long: its last map is dropped and GPUs have no pod until it answers
  // (a pod may have ended meanwhile; a stale name would charge its energy to the wrong pod).
  // Shorter outages (a kubelet restart) keep the last map.
  std::chrono::milliseconds forget_after{30000};
  // Called on the watcher's thread with each answer (not under its lock: it may call owner());
  // empty: none. It must not throw.
  std::function<void(const DeviceOwners&)> on_answer;
  // Finds the GPU of a MIG device ("MIG-..."); empty: MIG devices are nobody's GPU.
  MigParent mig_parent;
};

// Keeps the owners fresh on a thread of its own; readers never wait for the kubelet. A kubelet
// that does not answer is logged once (and its return once).
class PodResourcesWatcher {
 public:
  // Throws ConfigError (naming the socket) in a build without gRPC.
  PodResourcesWatcher(std::string socket_path, WatcherOptions options);
  ~PodResourcesWatcher();
  PodResourcesWatcher(const PodResourcesWatcher&) = delete;
  PodResourcesWatcher& operator=(const PodResourcesWatcher&) = delete;

  // The owner of the device with this id (any case), if a pod holds it.
  std::optional<DeviceOwner> owner(const std::string& device_id) const;
  // The owners of a GPU of this UUID (NVIDIA) or PCI address (AMD), either of which may be "",
  // merged (merge_owners): the pods it was given to whole, as replicas ("GPU-...::N") or as MIG
  // devices. std::nullopt when no pod holds it.
  std::optional<DeviceOwner> owner_of_gpu(const std::string& uuid, const std::string& pci) const;
  // Reads the kubelet now (on the caller's thread); false when it failed.
  bool refresh();
  int64_t failures() const;

 private:
  void run();

  std::string socket_path_;
  WatcherOptions options_;
  mutable std::mutex mu_;
  std::mutex answer_mu_;  // one on_answer at a time (the thread's, a caller's refresh())
  std::condition_variable cv_;
  bool stop_ = false;
  bool failing_ = false;
  int64_t failures_ = 0;
  std::chrono::steady_clock::time_point last_answer_;
  DeviceOwners owners_;
  std::map<std::string, std::vector<DeviceOwner>> by_gpu_;  // gpu_key_of_device -> owners
  std::thread thread_;
};

}  // namespace zeus::kube
