// zeusd's own job-energy record for each pod holding GPUs (`zeusd serve --kubelet-socket`):
// Kubernetes runs no Slurm prolog, so the kubelet's list is the prolog and epilog. A pod that
// appears on it with GPUs of this node starts the record "pod:<namespace>:<name>" on them; a pod
// gone from it stops its record. `zeus job-energy report pod:NS:NAME` reads it as any job's.
#pragma once

#include <map>
#include <optional>
#include <string>

#include "zeus/daemon/job_energy.h"
#include "zeus/kube/pod_resources.h"

namespace zeus::daemon {

// Device id (lower case: a GPU UUID for NVIDIA's device plugin, a PCI address for AMD's) ->
// zeusd's GPU id.
using GpuIdsByDevice = std::map<std::string, int>;

// Brings the pod records in line with one answer of the kubelet: starts the records of pods
// that hold GPUs here and have none running, stops the running ones whose pod holds none (it
// ended, or zeusd restarted after it did: then the record ends at this answer, not at the pod's
// end). A pod whose GPUs changed keeps its record on the GPUs it started with. Errors of the
// book are logged, never thrown: the kubelet's thread calls this.
void update_pod_records(JobEnergyBook& book, const kube::DeviceOwners& owners,
                        const GpuIdsByDevice& gpu_ids);

}  // namespace zeus::daemon
