// Per-GPU authorization on Kubernetes (`zeusd serve --kubelet-device-checkpoint`): a client whose
// process runs in a pod may change only the GPUs the kubelet allocated to that pod. A pod that
// reaches zeusd's socket could otherwise cap any GPU of the node, another pod's included.
//
// Note [pod authority]
// 1. The client's pod is its process's cgroup (kube::pod_uid_of_process): the kubelet names a
//    pod's cgroup after the pod's UID, and a container cannot leave it. zeusd must see the pid
//    for this (hostPID: true in its DaemonSet); a client whose pid it cannot see is refused.
// 2. The pod's GPUs are the kubelet's device-manager checkpoint's entries for that UID (the
//    kubelet's own record of each allocation, read again when the file changes), each device id
//    reduced to its physical GPU (kube/device_ids.h: replicas, MIG devices).
// 3. A process in no pod (a host process: a Slurm job, an operator) is not restricted here: the
//    socket's mode and group decide who reaches zeusd at all, and leases keep uids apart.
// 4. An administrator (zeusd's admin token) is never restricted.
// Fail closed: a checkpoint that cannot be read refuses every pod's change, saying why.
#pragma once

#include <sys/stat.h>

#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "zeus/daemon/leases.h"
#include "zeus/daemon/pod_records.h"
#include "zeus/kube/pod_identity.h"
#include "zeus/kube/pod_resources.h"

namespace zeus::daemon {

struct PodAuthorityOptions {
  std::filesystem::path checkpoint;  // kubelet_internal_checkpoint
  GpuOfDevice gpu_of;                // a device id -> zeusd's GPU id
  // Names a device's pod for messages (the pod-resources watcher's owner()); empty: by UID.
  std::function<std::optional<kube::DeviceOwner>(const std::string& device_id)> owner_of;
  // The pod UID of a process; empty: kube::pod_uid_of_process.
  std::function<std::optional<std::string>(pid_t)> pod_of_process;
};

class PodAuthority {
 public:
  explicit PodAuthority(PodAuthorityOptions options);

  // Throws PermissionError naming the GPU, the pod and its GPUs when `actor` may not change
  // `gpu` (Note [pod authority]). Thread-safe.
  void check(const Actor& actor, int gpu) const;

  // The GPUs allocated to pod `uid` (lower case), sorted; throws PermissionError when the
  // checkpoint cannot be read.
  std::vector<int> gpus_of_pod(const std::string& uid) const;

 private:
  using Pods = std::map<std::string, std::vector<kube::PodDevices>>;
  // The checkpoint's allocations, read again when its inode, size or mtime changed.
  Pods pods() const;

  PodAuthorityOptions options_;
  mutable std::mutex mu_;
  mutable Pods pods_;                           // under mu_
  mutable std::optional<struct stat> read_at_;  // under mu_: the file last read
};

}  // namespace zeus::daemon
