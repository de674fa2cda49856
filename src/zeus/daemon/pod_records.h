// zeusd's own job-energy record for each pod holding GPUs (`zeusd serve --kubelet-socket`):
// Kubernetes runs no Slurm prolog, so the kubelet's list is the prolog and epilog. A pod that
// appears on it with GPUs of this node starts the record "pod:<namespace>:<name>" on them; a pod
// gone from it stops its record. `zeus job-energy report pod:NS:NAME` reads it as any job's.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>

#include "zeus/daemon/job_energy.h"
#include "zeus/kube/pod_resources.h"

namespace zeus::daemon {

// A device plugin's device id (kube/device_ids.h: a GPU, a replica of one, a MIG device) ->
// zeusd's id of the physical GPU, or std::nullopt (another node's, or a GPU zeusd does not see).
using GpuOfDevice = std::function<std::optional<int>(const std::string& device_id)>;

// Brings the pod records in line with one answer of the kubelet: starts the records of pods
// that hold GPUs here and have none running, stops the running ones whose pod holds none (it
// ended, or zeusd restarted after it did: then the record ends at this answer, not at the pod's
// end). A pod whose GPUs changed keeps its record on the GPUs it started with. Errors of the
// book are logged, never thrown: the kubelet's thread calls this.
// A GPU shared by several pods is in each one's record.
void update_pod_records(JobEnergyBook& book, const kube::DeviceOwners& owners,
                        const GpuOfDevice& gpu_of);

}  // namespace zeus::daemon
