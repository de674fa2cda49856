#include "zeus/daemon/pod_authority.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cstring>
#include <set>

#include "zeus/common/atomic_file.h"
#include "zeus/common/errors.h"

namespace zeus::daemon {

namespace {

bool same_file(const struct stat& a, const struct stat& b) {
  return a.st_ino == b.st_ino && a.st_dev == b.st_dev && a.st_size == b.st_size &&
         a.st_mtim.tv_sec == b.st_mtim.tv_sec && a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

}  // namespace

PodAuthority::PodAuthority(PodAuthorityOptions options) : options_(std::move(options)) {
  if (!options_.pod_of_process) {
    options_.pod_of_process = kube::pod_uid_of_process;
  }
}

PodAuthority::Pods PodAuthority::pods() const {
  const std::string path = options_.checkpoint.string();
  std::lock_guard lock(mu_);
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw PermissionError(fmt::format(
        "the kubelet's device checkpoint {} cannot be read ({}), so zeusd cannot tell which GPUs "
        "a pod holds and refuses pods' changes; mount /var/lib/kubelet/device-plugins read-only "
        "into zeusd (deploy/kubernetes/), or drop --kubelet-device-checkpoint",
        path, std::strerror(errno)));
  }
  if (!read_at_ || !same_file(*read_at_, st)) {
    try {
      pods_ = kube::parse_device_checkpoint(read_file(options_.checkpoint), path);
    } catch (const Error& e) {
      throw PermissionError(
          fmt::format("{}; zeusd refuses pods' changes until it reads", e.what()));
    }
    read_at_ = st;
  }
  return pods_;
}

std::vector<int> PodAuthority::gpus_of_pod(const std::string& uid) const {
  const Pods all = pods();
  std::set<int> gpus;
  if (const auto it = all.find(uid); it != all.end()) {
    for (const kube::PodDevices& d : it->second) {
      for (const std::string& id : d.device_ids) {
        if (const auto gpu = options_.gpu_of(id)) {
          gpus.insert(*gpu);
        }
      }
    }
  }
  return {gpus.begin(), gpus.end()};
}

void PodAuthority::check(const Actor& actor, int gpu) const {
  if (actor.admin || !actor.process) {
    return;  // an administrator; or nobody to lease, which the lease keeper refuses
  }
  const Holder& p = *actor.process;
  if (p.pid <= 0) {
    throw PermissionError(fmt::format(
        "GPU {}: {} is in a PID namespace zeusd cannot see, so zeusd cannot tell which pod it "
        "is in, and it changes only the GPUs of a client's own pod (--kubelet-device-checkpoint); "
        "run zeusd in the host's PID namespace (hostPID: true in its DaemonSet)",
        gpu, actor.name));
  }
  std::optional<std::string> uid;
  try {
    uid = options_.pod_of_process(p.pid);
  } catch (const Error& e) {
    throw PermissionError(fmt::format("GPU {}: cannot tell which pod {} is in ({}); refused", gpu,
                                      actor.name, e.what()));
  }
  if (!uid) {
    return;  // a host process (Note [pod authority], 3)
  }
  const std::vector<int> held = gpus_of_pod(*uid);
  if (std::find(held.begin(), held.end(), gpu) != held.end()) {
    return;
  }
  // Name the pod as the pod-resources API does, where a device of it tells.
  std::string pod = fmt::format("pod {}", *uid);
  if (options_.owner_of) {
    const Pods all = pods();
    if (const auto it = all.find(*uid); it != all.end()) {
      for (const kube::PodDevices& d : it->second) {
        for (const std::string& id : d.device_ids) {
          if (const auto owner = options_.owner_of(id)) {
            pod = fmt::format("pod {}/{} (UID {})", owner->namespace_name, owner->pod, *uid);
          }
        }
      }
    }
  }
  throw PermissionError(fmt::format(
      "GPU {} is not allocated to {}, where {} runs (the kubelet gave it {}); a pod may change "
      "only its own GPUs",
      gpu, pod, actor.name,
      held.empty() ? std::string("no GPU") : fmt::format("GPU(s) {}", fmt::join(held, ", "))));
}

}  // namespace zeus::daemon
