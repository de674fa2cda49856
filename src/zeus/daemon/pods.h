// Which pod holds a GPU, as zeusd sees it (`zeusd serve --kubelet-socket`): its metrics, holder
// series, audit lines and job-energy records name the pod. The kubelet's side is kube/.
#pragma once

#include <functional>
#include <optional>

#include "zeus/kube/pod_resources.h"

namespace zeus::daemon {

// The pod holding GPU `gpu` (zeusd's GPU id) now, or std::nullopt (no pod, no kubelet, or zeusd
// runs without --kubelet-socket). Contract: thread-safe and never waits for the kubelet.
using PodOfGpu = std::function<std::optional<kube::DeviceOwner>(int gpu)>;

// The job-energy id zeusd gives a pod's own record: "pod:<namespace>:<name>".
std::string pod_job_id(const kube::DeviceOwner& owner);

}  // namespace zeus::daemon
