#include "zeus/daemon/pod_records.h"

#include <algorithm>
#include <set>
#include <vector>

#include "zeus/common/errors.h"
#include "zeus/common/logging.h"

namespace zeus::daemon {

std::string pod_job_id(const kube::DeviceOwner& owner) {
  return "pod:" + owner.namespace_name + ":" + owner.pod;
}

void update_pod_records(JobEnergyBook& book, const kube::DeviceOwners& owners,
                        const GpuOfDevice& gpu_of) {
  struct PodGpus {
    std::vector<int> gpus;
    std::map<int, kube::DeviceOwner> owners;
  };
  std::map<std::string, PodGpus> pods;
  for (const auto& [device, owner] : owners) {
    const std::optional<int> gpu = gpu_of(device);
    if (!gpu) {
      continue;  // another node's id, or a GPU zeusd does not see
    }
    PodGpus& p = pods[pod_job_id(owner)];
    if (!p.owners.contains(*gpu)) {
      p.gpus.push_back(*gpu);  // once, though the pod holds two replicas of it
    }
    p.owners[*gpu] = owner;
  }
  const std::vector<std::string> running = book.running("pod:");
  const std::set<std::string> running_set(running.begin(), running.end());
  for (const std::string& id : running) {
    if (!pods.contains(id)) {
      try {
        book.stop(id);
      } catch (const Error& e) {
        logger().error("job energy: cannot stop the record of ended pod {}: {}", id, e.what());
      }
    }
  }
  for (auto& [id, p] : pods) {
    if (running_set.contains(id)) {
      continue;
    }
    std::sort(p.gpus.begin(), p.gpus.end());
    try {
      book.start(id, p.gpus, p.owners);
    } catch (const Error& e) {
      logger().error("job energy: cannot start the record of pod {}: {}", id, e.what());
    }
  }
}

}  // namespace zeus::daemon
